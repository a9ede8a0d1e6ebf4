"""SIGTERM/SIGINT to a ``runworker`` process: cooperative jobs pause, stubborn ones are released,
and a second signal exits at once."""

from __future__ import annotations

import signal
import time

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job, WorkerHeartbeat
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import journal_of, postgres_only, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

SHUTDOWN_TIMEOUT = 2.0


def test_sigterm_pauses_cooperative_job_with_carry_and_releases_stubborn_one_after_timeout(
    runworker: WorkerProcesses,
) -> None:
    [proc] = runworker.start_ready(
        "--concurrency", "2", "--shutdown-timeout", str(SHUTDOWN_TIMEOUT)
    )
    coop = tasks.cooperative.enqueue(seconds=120)
    stub = tasks.stubborn.enqueue(seconds=120)
    wait_for(lambda: Execution.objects.filter(job_id__in=[coop.id, stub.id]).count() == 2)
    time.sleep(0.3)  # let the cooperative job take a few steps

    signalled = time.monotonic()
    proc.send(signal.SIGTERM)
    rc = proc.wait(30)
    took = time.monotonic() - signalled
    assert rc == 0, proc.describe()
    # It waited out the shutdown timeout for the stubborn job, and no longer than that
    # by a wide margin (the job itself would run for two minutes).
    assert SHUTDOWN_TIMEOUT - 0.5 <= took < SHUTDOWN_TIMEOUT + 15, proc.describe()

    job = Job.objects.get(id=coop.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 0
    assert job.run_count == 1
    assert job.claimed_by == ""
    assert job.carry["steps"] > 0
    [paused] = journal_of(coop.id)
    assert paused.outcome == "paused"
    assert paused.note == "stopping early"
    assert paused.worker == proc.worker_id

    job = Job.objects.get(id=stub.id)
    assert job.status == Status.PENDING
    assert job.failure_count == 0
    assert job.run_count == 1
    assert job.claimed_by == ""
    assert job.claim_expires_at is None
    assert job.carry == {}, "a released run keeps the carry as last settled, not its own"
    [released] = journal_of(stub.id)
    assert released.outcome == "released"
    assert released.worker == proc.worker_id
    assert released.note == "worker shut down"

    heartbeat = WorkerHeartbeat.objects.get(pid=proc.pid)
    assert heartbeat.stopped_at is not None


def test_second_signal_exits_runworker_at_once_leaving_the_claim_to_expire(
    runworker: WorkerProcesses,
) -> None:
    [proc] = runworker.start_ready("--concurrency", "1", "--shutdown-timeout", "60")
    stub = tasks.stubborn.enqueue(seconds=120)
    wait_for(lambda: Execution.objects.filter(job_id=stub.id).exists())

    proc.send(signal.SIGTERM)
    wait_for(lambda: "send again to exit at once" in proc.log(), timeout=10)
    assert proc.alive(), "the first signal waits for the stubborn job"
    signalled = time.monotonic()
    proc.send(signal.SIGINT)
    rc = proc.wait(15)
    took = time.monotonic() - signalled
    assert rc != 0
    assert took < 10, f"exited {took:.1f}s after the second signal; the grace was 60 s"
    assert "second signal: exiting now" in proc.log()

    # Nothing was settled or released: the claim stays until its lease runs out.
    job = Job.objects.get(id=stub.id)
    assert job.status == Status.CLAIMED
    assert job.claimed_by == proc.worker_id
    assert job.run_count == 1
    assert journal_of(stub.id) == []
