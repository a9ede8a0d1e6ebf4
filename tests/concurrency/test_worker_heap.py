"""A worker process runs its jobs with its start-up heap frozen (``worker.heap``): one
process, the supervised processes (forked from a supervisor that froze first) and a
process-pool child; a worker run inside another program hands that program's heap back
as it found it."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import pytest
from django.core.management import call_command

from django_jobqueue import JobHandle
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import row_locking
from tests.taskapp import tasks

pytestmark = pytest.mark.django_db(transaction=True)

# Django, the test project and the queue are tens of thousands of tracked objects.
START_UP_OBJECTS = 10_000


def _frozen_counts(handles: Sequence[JobHandle]) -> list[int]:
    return [Job.objects.get(id=h.id).result for h in handles]


@row_locking
@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_worker_process_runs_its_jobs_with_its_start_up_heap_frozen(
    runworker: WorkerProcesses, processes: str
) -> None:
    handles = tasks.frozen_objects.enqueue_many([{} for _ in range(8)])
    worker = runworker.start("--burst", "--processes", processes)
    assert worker.wait(timeout=120) == 0, worker.describe()
    counts = _frozen_counts(handles)
    assert all(n > START_UP_OBJECTS for n in counts), counts


@pytest.mark.sqlite
def test_a_worker_run_inside_another_program_hands_its_heap_back() -> None:
    handle = tasks.frozen_objects.enqueue()
    call_command("runworker", "--burst", "--processes", "1", verbosity=0)
    assert _frozen_counts([handle])[0] > START_UP_OBJECTS
    assert gc.get_freeze_count() == 0, "the command left this process's objects frozen"


@pytest.mark.sqlite
def test_a_process_pool_child_runs_its_jobs_with_its_start_up_heap_frozen() -> None:
    handle = tasks.frozen_objects.enqueue()
    call_command("runworker", "--burst", "--processes", "1", "--pool", "process", verbosity=0)
    assert _frozen_counts([handle])[0] > START_UP_OBJECTS
    assert gc.get_freeze_count() == 0
