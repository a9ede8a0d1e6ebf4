"""``runworker --pool process``: real workers whose slots run their jobs in children.

A runaway task is stopped at its hard limit by killing its child (its soft limit raised
inside it first), and the slot runs the next job in a new child; a child killed under a
run is seen at once and its job recovered within a second or two, whatever its lease.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import journal_of, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rpartition(")")[2].split()[0] == "Z"


def test_a_runaway_task_is_killed_at_its_time_limit_after_its_soft_limit_and_the_slot_goes_on(
    runworker: WorkerProcesses, tmp_path: Path
) -> None:
    marker = tmp_path / "soft-limit-raised"
    runaway = tasks.runaway.enqueue(marker=str(marker))
    [worker] = runworker.start_ready("--pool", "process", "--concurrency", "1")
    run = wait_for(lambda: Execution.objects.filter(job_id=runaway.id).first(), timeout=60)
    assert run.pid != worker.pid, "the task ran in the worker process, not in a child"

    wait_for(lambda: Job.objects.get(id=runaway.id).status == Status.DEAD, timeout=30)
    [dead] = journal_of(runaway.id)
    # From the run's start (its own row, written first thing) to its settlement's write.
    settled_after = (dead.recorded_at - run.started_at).total_seconds()
    assert settled_after < 3, f"settled {settled_after:.1f}s after the run started"
    assert "time_limit" in dead.note, dead.note
    assert f"child (pid {run.pid}) killed" in dead.note, dead.note
    assert marker.read_text() == str(run.pid), "the soft limit was not raised inside the task"
    wait_for(lambda: _gone(run.pid), timeout=10)

    after = tasks.record.enqueue(n=1)
    wait_for(lambda: Job.objects.get(id=after.id).status == Status.COMPLETED, timeout=60)
    [next_run] = Execution.objects.filter(job_id=after.id)
    assert next_run.pid not in (run.pid, worker.pid), "the next job ran in a new child"
    assert worker.alive()


def test_a_killed_pool_child_has_its_job_recovered_at_once(runworker: WorkerProcesses) -> None:
    [worker] = runworker.start_ready("--pool", "process", "--concurrency", "2")
    handle = tasks.long_lease_sleep.enqueue(seconds=600)
    run = wait_for(lambda: Execution.objects.filter(job_id=handle.id).first(), timeout=60)
    assert run.pid != worker.pid

    os.kill(run.pid, signal.SIGKILL)
    job = wait_for(
        lambda: (j := Job.objects.get(id=handle.id)).status == Status.PENDING and j, timeout=2
    )
    assert job.failure_count == 1
    [recovered] = journal_of(handle.id)
    assert recovered.outcome == "stale-recovered"
    assert f"child (pid {run.pid}) killed by SIGKILL" in recovered.note, recovered.note
    assert Execution.objects.filter(job_id=handle.id).count() == 1, "it ran again at once"
    assert worker.alive()
