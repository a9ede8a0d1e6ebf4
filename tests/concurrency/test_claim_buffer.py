"""The claim buffer: jobs claimed beyond free slots wait under the worker's lease, are
released without a failure when it stops, and what it does not buffer others take."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.pipeline import Ended
from django_jobqueue.worker import sizing
from django_jobqueue.worker.slots import Slots
from tests.helpers import WorkerThread, journal_of, row_locking, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]


def test_a_buffered_job_is_released_unrun_on_shutdown_and_others_take_the_rest(
    worker_thread: Callable[..., WorkerThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A buffer of at most one job, whatever the round trips measure on a loaded machine.
    monkeypatch.setattr(sizing, "CAP", 1)
    long_one = tasks.cooperative.enqueue(seconds=60)
    buffered = tasks.record.enqueue(n=0)
    holder = WorkerThread(
        concurrency=1, shutdown_timeout=2, poll_interval=0.5, worker_id="test:holder"
    )
    # As measured after a stream of 1 ms jobs over 10 ms round trips: one job of buffer.
    holder.worker._pools.sizing.ran(0.001)
    holder.worker._pools.sizing.turned(0.010)
    holder.start()
    try:
        wait_for(lambda: Job.objects.filter(status=Status.CLAIMED).count() == 2, timeout=30)
        job = Job.objects.get(id=buffered.id)
        assert job.claimed_by == holder.worker.worker_id
        assert not Execution.objects.filter(job_id=buffered.id).exists(), "not started"

        rest = tasks.record.enqueue_many([{"n": i} for i in range(1, 6)])
        other = worker_thread(concurrency=2, worker_id="test:other")
        wait_for(
            lambda: (
                Job.objects.filter(id__in=[h.id for h in rest], status=Status.COMPLETED).count()
                == 5
            ),
            timeout=30,
        )
        done_by = {e.worker for h in rest for e in journal_of(h.id)}
        assert done_by == {other.worker.worker_id}, "the busy worker claimed no more"
        assert Job.objects.get(id=buffered.id).claimed_by == holder.worker.worker_id
        other.stop()
    finally:
        holder.stop()

    job = Job.objects.get(id=buffered.id)
    assert (job.status, job.failure_count) == (Status.PENDING, 0)
    [released] = journal_of(buffered.id)
    assert released.outcome == "released"
    assert "before it started" in released.note
    assert not Execution.objects.filter(job_id=buffered.id).exists(), "it never ran"
    [paused] = journal_of(long_one.id)
    assert paused.outcome == "paused"


def test_a_queued_run_is_either_started_or_withdrawn_never_both() -> None:
    gate = threading.Event()
    ran: list[int] = []

    def run(job: object, ctx: object, guard: ThreadConnections) -> Ended:
        ran.append(job.n)  # type: ignore[attr-defined]
        gate.wait(10)
        return None  # type: ignore[return-value]

    class Job_:
        def __init__(self, n: int) -> None:
            self.n = n
            self.id = n
            self.run_count = 1

    class Running_:
        def __init__(self, n: int) -> None:
            self.job = Job_(n)
            self.ctx = None

    slots = Slots(run=run, on_result=lambda: None)  # type: ignore[arg-type]
    slots.start(1)
    for n in range(4):
        slots.submit(Running_(n))  # type: ignore[arg-type]
    wait_for(lambda: ran == [0], timeout=10)
    time.sleep(0.1)
    assert slots.longest_run() > 0
    assert slots.withdraw(waited=60) == [], "none has waited a minute"
    withdrawn = slots.withdraw()
    assert sorted(r.job.n for r in withdrawn) == [1, 2, 3]  # type: ignore[attr-defined]
    gate.set()
    slots.stop()
    time.sleep(0.3)
    assert ran == [0], "a withdrawn run never starts"
