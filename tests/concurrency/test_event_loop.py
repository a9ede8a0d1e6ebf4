"""``async def`` tasks on the worker's event loop: many awaits, few threads, and the
guarantees of a thread run (timeouts, cancellation, lease renewal, graceful shutdown)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.worker import sizing
from django_jobqueue.worker.eventloop import DB_THREADS
from tests.helpers import WorkerThread, journal_of, postgres_only, row_locking, wait_for
from tests.taskapp import tasks

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def gauge() -> Iterator[tasks.AsyncGauge]:
    tasks.async_gauge.reset()
    yield tasks.async_gauge
    tasks.async_gauge.reset()


def done(count: int, kind: str) -> Callable[[], bool]:
    return lambda: Job.objects.filter(kind=kind, status=Status.COMPLETED).count() == count


def test_a_thousand_async_jobs_await_at_once_without_a_thread_each(
    worker_thread: Callable[..., WorkerThread], gauge: tasks.AsyncGauge
) -> None:
    tasks.async_wait.enqueue_many([{"seconds": 3.0}] * 1200)
    worker_thread(concurrency=2, async_concurrency=1200)
    wait_for(done(1200, "tests.async_wait"), timeout=120, interval=0.2)
    assert gauge.peak >= 1000, f"only {gauge.peak} awaited at once"
    # The test's own threads, the worker's loop, listener and slot threads: a few dozen
    # at most, where a thread per run would be over a thousand.
    assert gauge.threads_at_peak < 50, f"{gauge.threads_at_peak} threads at the peak"
    assert not gauge.cancelled


def test_async_orm_calls_run_side_by_side_on_a_few_threads(
    worker_thread: Callable[..., WorkerThread], gauge: tasks.AsyncGauge
) -> None:
    tasks.async_query.enqueue_many([{"seconds": 0.05}] * 200)
    worker_thread(concurrency=1, async_concurrency=200)
    wait_for(done(200, "tests.async_query"), timeout=60, interval=0.2)
    # Not every query through one thread (asgiref's default), nor a thread per run.
    assert 1 < len(gauge.db_threads) <= DB_THREADS, gauge.db_threads
    assert all(name.startswith("jobqueue-async-db-") for name in gauge.db_threads)


def test_an_async_run_past_its_timeout_is_cancelled_and_retried(
    worker_thread: Callable[..., WorkerThread], gauge: tasks.AsyncGauge
) -> None:
    handle = tasks.async_overrun.enqueue(seconds=60)
    worker_thread(concurrency=1, async_concurrency=10, shutdown_timeout=1)
    wait_for(lambda: journal_of(handle.id), timeout=30)
    [entry] = journal_of(handle.id)
    assert entry.outcome == "retried"
    assert "timed out" in entry.note
    wait_for(lambda: str(handle.id) in gauge.cancelled, timeout=10)
    job = Job.objects.get(id=handle.id)
    assert job.failure_count == 1


def test_an_async_run_keeps_its_lease_renewed(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = tasks.async_leased.enqueue(seconds=5)  # a 2 s lease, renewed as it runs
    rescuer = worker_thread(concurrency=1, async_concurrency=10)
    wait_for(done(1, "tests.async_leased"), timeout=30)
    rescuer.stop()
    job = Job.objects.get(id=handle.id)
    assert (job.run_count, job.failure_count) == (1, 0)
    assert [e.outcome for e in journal_of(handle.id)] == ["completed"]


def test_graceful_shutdown_pauses_cooperative_async_runs_and_releases_the_rest(
    worker_thread: Callable[..., WorkerThread], gauge: tasks.AsyncGauge
) -> None:
    polite = tasks.async_cooperative.enqueue(seconds=60)
    stubborn = tasks.async_wait.enqueue(seconds=60)
    worker = worker_thread(concurrency=1, async_concurrency=10, shutdown_timeout=1)
    wait_for(lambda: Job.objects.filter(status=Status.CLAIMED).count() == 2, timeout=30)
    time.sleep(0.3)  # a few steps of the cooperative run
    worker.stop()
    [paused] = journal_of(polite.id)
    assert paused.outcome == "paused"
    job = Job.objects.get(id=polite.id)
    assert (job.status, job.failure_count) == (Status.PENDING, 0)
    assert job.carry["steps"] > 0
    [released] = journal_of(stubborn.id)
    assert released.outcome == "released"
    assert Job.objects.get(id=stubborn.id).failure_count == 0
    assert str(stubborn.id) in gauge.cancelled, "the released run was cancelled, not left"


def test_sync_and_async_kinds_each_fill_their_own_pool(
    worker_thread: Callable[..., WorkerThread], gauge: tasks.AsyncGauge
) -> None:
    tasks.async_wait.enqueue_many([{"seconds": 2.0}] * 50)
    tasks.record.enqueue_many([{"n": i} for i in range(20)])
    worker_thread(concurrency=2, async_concurrency=50)
    wait_for(done(20, "tests.taskapp.tasks.record"), timeout=60, interval=0.2)
    wait_for(done(50, "tests.async_wait"), timeout=60, interval=0.2)
    assert gauge.peak >= 40, "the async runs waited on the slot threads"


@postgres_only
def test_a_dead_connection_on_an_orm_thread_is_dropped_after_the_run_that_met_it(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    # The killing run fails; the runs after it, on every one of the loop's ORM threads
    # (the one whose session died included), connect afresh and complete.
    killer = tasks.async_kills_its_session.enqueue()
    worker_thread(concurrency=1, async_concurrency=1)
    wait_for(lambda: Job.objects.get(id=killer.id).status == Status.DEAD, timeout=30)
    tasks.async_query.enqueue_many([{"seconds": 0.0}] * (3 * DB_THREADS))
    wait_for(done(3 * DB_THREADS, "tests.async_query"), timeout=60, interval=0.2)
    queries = Job.objects.filter(kind="tests.async_query")
    assert not queries.exclude(status=Status.COMPLETED)
    assert sorted(set(queries.values_list("failure_count", flat=True))) == [0]


def test_a_buffered_async_job_waits_unstarted_and_is_released_on_shutdown(
    gauge: tasks.AsyncGauge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The event loop's claim buffer: a job claimed beyond ASYNC_CONCURRENCY waits under
    the lease without starting, and is handed back unrun, no failure counted, on stop."""
    monkeypatch.setattr(sizing, "CAP", 1)  # a buffer of one job at most
    first = tasks.async_wait.enqueue(seconds=60)
    buffered = tasks.async_wait.enqueue(seconds=60)
    holder = WorkerThread(concurrency=1, async_concurrency=1, shutdown_timeout=1)
    # As measured after a stream of 10 ms runs over 10 ms round trips: one job of buffer.
    holder.worker._pools.loop_sizing.ran(0.010)
    holder.worker._pools.loop_sizing.turned(0.010)
    holder.start()
    try:
        wait_for(lambda: Job.objects.filter(status=Status.CLAIMED).count() == 2, timeout=30)
        time.sleep(0.3)
        assert gauge.now == 1, "only ASYNC_CONCURRENCY runs at once"
    finally:
        holder.stop()
    notes = {}
    for handle in (first, buffered):
        job = Job.objects.get(id=handle.id)
        assert (job.status, job.failure_count) == (Status.PENDING, 0)
        [released] = journal_of(handle.id)
        assert released.outcome == "released"
        notes[str(handle.id)] = released.note
    waited = [job_id for job_id, note in notes.items() if "before it started" in note]
    assert len(waited) == 1, notes
    assert waited[0] not in gauge.cancelled, "it never started, so nothing to cancel"
    assert set(notes) - set(waited) == gauge.cancelled, "the started one was cancelled"
