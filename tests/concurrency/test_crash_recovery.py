"""A worker that dies mid-job: the lease runs out, another worker recovers and finishes it."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import WorkerThread, journal_of, row_locking, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]


def test_sigkilled_worker_job_is_recovered_after_lease_expiry_and_completed_elsewhere(
    runworker: WorkerProcesses, worker_thread: Callable[..., WorkerThread]
) -> None:
    [doomed] = runworker.start_ready("--concurrency", "1")
    handle = tasks.short_lease_sleep.enqueue(seconds=120)

    first = wait_for(lambda: Execution.objects.filter(job_id=handle.id, run_no=1).first())
    assert first.pid == doomed.pid
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.CLAIMED
    assert job.claimed_by == doomed.worker_id
    assert job.claim_expires_at is not None
    # The live worker keeps its 2 s lease ahead of the clock while the job runs.
    claimed_until = job.claim_expires_at
    wait_for(
        lambda: (Job.objects.get(id=handle.id).claim_expires_at or claimed_until) > claimed_until,
        timeout=10,
    )

    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.CLAIMED, "nothing settles the run of a killed worker"
    assert job.run_count == 1
    assert journal_of(handle.id) == []
    lease_end = job.claim_expires_at
    assert lease_end is not None

    rescuer = worker_thread(concurrency=1, poll_interval=0.5)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=20)
    rescuer.stop()

    job = Job.objects.get(id=handle.id)
    assert job.failure_count == 1
    assert job.run_count == 2
    assert job.result == "finished"
    stale, completed = journal_of(handle.id)
    assert (stale.outcome, completed.outcome) == ("stale-recovered", "completed")
    assert stale.run_no == 1
    assert stale.worker == doomed.worker_id
    assert stale.recorded_at >= lease_end, "recovered before the lease ran out"
    assert "lease expired" in stale.note
    assert completed.run_no == 2
    assert completed.worker == rescuer.worker.worker_id
    assert completed.worker != doomed.worker_id

    # The killed run never finished; the second one ran in this process's worker thread.
    runs = list(Execution.objects.filter(job_id=handle.id).order_by("run_no"))
    assert [(r.run_no, r.pid) for r in runs] == [(1, doomed.pid), (2, os.getpid())]
    assert runs[0].finished_at is None
    assert runs[1].finished_at is not None
