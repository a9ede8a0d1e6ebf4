"""A worker process runs its jobs with its collector tuned for its loop (``worker.heap``:
its start-up heap frozen, its youngest generation collected at ``YOUNG_THRESHOLD``):
one process, the supervised processes (forked from a supervisor that froze first) and a
process-pool child; a worker run inside another program hands that program's heap and
thresholds back as it found them."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest
from django.core.management import call_command

from django_jobqueue import JobHandle
from django_jobqueue.models import Job
from django_jobqueue.worker.heap import YOUNG_THRESHOLD
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import row_locking
from tests.taskapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

# Django, the test project and the queue are tens of thousands of tracked objects.
START_UP_OBJECTS = 10_000


def _collectors(handles: Sequence[JobHandle]) -> list[list[int]]:
    """What each job found of its process's collector (``tasks.collector``)."""
    return [Job.objects.get(id=h.id).result for h in handles]


def _tuned(state: list[int]) -> bool:
    """Whether a job ran with the start-up heap frozen and the young threshold set."""
    frozen, young = state
    return frozen > START_UP_OBJECTS and young == YOUNG_THRESHOLD


@row_locking
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_worker_process_runs_its_jobs_with_its_collector_tuned(
    runworker: WorkerProcesses, processes: str
) -> None:
    handles = tasks.collector.enqueue_many([{} for _ in range(8)])
    worker = runworker.start("--burst", "--processes", processes)
    assert worker.wait(timeout=120) == 0, worker.describe()
    states = _collectors(handles)
    assert all(map(_tuned, states)), states


@pytest.mark.sqlite
def test_a_worker_run_inside_another_program_hands_its_collector_back() -> None:
    handle = tasks.collector.enqueue()
    thresholds = gc.get_threshold()
    call_command("runworker", "--burst", "--processes", "1", verbosity=0)
    [state] = _collectors([handle])
    assert _tuned(state), state
    assert gc.get_freeze_count() == 0, "the command left this process's objects frozen"
    assert gc.get_threshold() == thresholds


@pytest.mark.sqlite
def test_a_process_pool_child_runs_its_jobs_with_its_collector_tuned() -> None:
    handle = tasks.collector.enqueue()
    call_command("runworker", "--burst", "--processes", "1", "--pool", "process", verbosity=0)
    [state] = _collectors([handle])
    assert _tuned(state), state
    assert gc.get_freeze_count() == 0
