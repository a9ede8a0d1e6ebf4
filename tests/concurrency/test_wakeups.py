"""What wakes an idle worker: NOTIFY on commit (never before), and the next scheduled job.

The ``runworker`` test is the end-to-end promise. The thread tests pin down which
wake-up did it: their worker's lease sweep (``Timings.recover``) is pushed out to
an hour, so only a NOTIFY, the next ``visible_at`` or the 30 s poll ceiling can wake it,
and a row written without a NOTIFY shows that nothing else does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.task.registry import registry
from django_jobqueue.worker.services.base import Timings
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import WorkerThread, postgres_only, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

RECORD = "tests.taskapp.tasks.record"


def started_at(job_id: object, timeout: float = 10.0) -> Execution:
    return wait_for(lambda: Execution.objects.filter(job_id=job_id).first(), timeout=timeout)


def test_idle_runworker_with_30s_poll_starts_new_job_within_1s_and_delayed_job_on_time(
    runworker: WorkerProcesses,
) -> None:
    [proc] = runworker.start_ready("--concurrency", "2", "--poll-interval", "30")
    warm_up = tasks.record.enqueue(n=0)
    started_at(warm_up.id)
    wait_for(lambda: Job.objects.get(id=warm_up.id).status == Status.COMPLETED)
    time.sleep(0.5)  # idle: nothing running, nothing scheduled

    fresh = tasks.record.enqueue(n=1)
    latency = (started_at(fresh.id).started_at - fresh.job.created_at).total_seconds()
    assert 0 <= latency < 1.0, f"started {latency:.3f}s after enqueue\n{proc.describe()}"

    time.sleep(0.5)
    delayed = tasks.record.using(delay=timedelta(seconds=2)).enqueue(n=2)
    due = Job.objects.get(id=delayed.id).visible_at
    assert due - delayed.job.created_at == timedelta(seconds=2)
    late = (started_at(delayed.id).started_at - due).total_seconds()
    assert 0 <= late < 1.0, f"started {late:.3f}s after it was due\n{proc.describe()}"

    wait_for(lambda: Job.objects.filter(status=Status.COMPLETED).count() == 3)
    assert proc.alive()
    print(f"NOTIFY start latency {latency:.3f}s; delayed job started {late:.3f}s after due")


class QuietWorker:
    """A worker thread (30 s poll ceiling) whose lease sweep is pushed out to an hour,
    recording when each NOTIFY reaches it."""

    def __init__(self, concurrency: int = 1) -> None:
        self.thread = WorkerThread(
            concurrency=concurrency,
            poll_interval=30,
            timings=Timings(recover=3600),
            shutdown_timeout=1,
        )
        self.notes: list[tuple[float, str]] = []
        listener = self.thread.worker._listener
        deliver = listener.on_notify

        def spy(payload: str) -> None:
            self.notes.append((time.monotonic(), payload))
            deliver(payload)

        listener.on_notify = spy

    def start(self) -> QuietWorker:
        self.thread.start()
        assert self.thread.worker._listener.listening.wait(10), "listener did not connect"
        time.sleep(0.3)  # past the wake-up every (re)connect gives: idle now
        return self

    def queue_notes(self, since: float = 0.0) -> list[float]:
        """When NOTIFYs about the default queue arrived (not the listener's own connect wake)."""
        return [at for at, payload in self.notes if payload == "default" and at >= since]


@pytest.fixture
def quiet_worker() -> Iterator[Callable[..., QuietWorker]]:
    started: list[QuietWorker] = []

    def start(concurrency: int = 1) -> QuietWorker:
        w = QuietWorker(concurrency)
        started.append(w)
        return w.start()

    yield start
    for w in started:
        if w.thread.thread.is_alive():
            w.thread.stop()


def test_notify_alone_wakes_an_idle_worker_and_next_visible_at_alone_starts_a_delayed_job(
    quiet_worker: Callable[[], QuietWorker],
) -> None:
    w = quiet_worker()
    # A row written without NOTIFY waits for the poll ceiling: this worker has no other timer.
    # (Every INSERT fires the notify trigger; replica mode is how a test skips it.)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL session_replication_role = replica")
        silent = Job.objects.create(kind=RECORD, payload={"n": 0})
    time.sleep(3)
    assert not Execution.objects.filter(job_id=silent.id).exists()
    assert Job.objects.get(id=silent.id).status == Status.PENDING

    # An enqueue's NOTIFY wakes it at once; it then claims both, oldest first.
    before = time.monotonic()
    fresh = tasks.record.enqueue(n=1)
    latency = (started_at(fresh.id).started_at - fresh.job.created_at).total_seconds()
    assert latency < 1.0
    assert w.queue_notes(since=before)
    assert started_at(silent.id).id < started_at(fresh.id).id

    # A delayed job: the NOTIFY finds nothing to claim; the worker sleeps until it is due.
    wait_for(lambda: Job.objects.filter(status=Status.COMPLETED).count() == 2)
    delayed = tasks.record.using(delay=timedelta(seconds=2)).enqueue(n=2)
    due = Job.objects.get(id=delayed.id).visible_at
    late = (started_at(delayed.id).started_at - due).total_seconds()
    assert 0 <= late < 1.0, f"started {late:.3f}s after it was due"


def test_a_job_arriving_while_the_worker_is_busy_starts_without_waiting_for_the_busy_run(
    quiet_worker: Callable[..., QuietWorker],
) -> None:
    """A busy worker (one slot running a long job) takes a new job at its NOTIFY: the
    other behaviours would be the busy run's end (20 s) or the poll ceiling (30 s)."""
    w = quiet_worker(concurrency=2)
    busy = tasks.timed_sleep.enqueue(seconds=20)
    started_at(busy.id)
    time.sleep(0.5)  # busy now: one run going, nothing else to wait for

    before = time.monotonic()
    fresh = tasks.record.enqueue(n=1)
    latency = (started_at(fresh.id).started_at - fresh.job.created_at).total_seconds()
    assert latency < 5.0, f"started {latency:.3f}s after enqueue, not at its NOTIFY"
    assert w.queue_notes(since=before)
    assert Job.objects.get(id=busy.id).status == Status.CLAIMED, "the busy run still going"


def test_rolled_back_enqueue_leaves_no_job_and_never_wakes_the_worker(
    quiet_worker: Callable[[], QuietWorker],
) -> None:
    w = quiet_worker()
    before = time.monotonic()

    seen_inside: list[bool] = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            handle = tasks.record.enqueue(n=1)
            seen_inside.append(Job.objects.filter(id=handle.id).exists())
            raise RuntimeError("business logic failed after the enqueue")

    with pytest.raises(RuntimeError, match="business logic failed"):
        enqueue_then_fail()
    assert seen_inside == [True]
    assert not Job.objects.exists()
    time.sleep(1)
    assert w.queue_notes(since=before) == []
    assert not Execution.objects.exists()
    assert w.thread.worker.processed == 0


def test_open_enqueue_transaction_wakes_worker_only_on_commit_and_job_starts_within_1s(
    quiet_worker: Callable[[], QuietWorker],
) -> None:
    w = quiet_worker()
    before = time.monotonic()
    with transaction.atomic():
        handle = tasks.record.enqueue(n=1)
        held_until = time.monotonic() + 3
        while time.monotonic() < held_until:
            # Read-committed: each query sees what the worker has committed meanwhile.
            assert not Execution.objects.filter(job_id=handle.id).exists()
            assert w.queue_notes(since=before) == [], "woken before commit"
            time.sleep(0.1)
        assert w.queue_notes(since=before) == [], "woken before commit"
        committing_at = timezone.now()  # the commit follows as the block exits
        committing = time.monotonic()

    latency = (started_at(handle.id).started_at - committing_at).total_seconds()
    assert latency < 1.0, f"started {latency:.3f}s after commit"
    notes = w.queue_notes(since=before)
    assert notes
    assert notes[0] >= committing
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED)


def test_the_loop_listens_on_its_own_connection_where_that_connection_is_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inline where the jobs alias is the one to LISTEN through and its connection is the
    session's own; a listener thread otherwise (``LISTEN_DATABASE`` elsewhere, a pool
    that lends the connection, a transaction pooler)."""
    from django.db import connections

    from django_jobqueue.worker.inline import InlineListener, inline_possible
    from django_jobqueue.worker.listener import Listener

    assert inline_possible("default", "default")
    assert not inline_possible("default", "direct"), "LISTEN_DATABASE names another alias"
    assert isinstance(QuietWorker().thread.worker._listener, InlineListener)
    options = connections["default"].settings_dict.get("OPTIONS") or {}
    monkeypatch.setitem(connections["default"].settings_dict, "OPTIONS", {**options, "pool": True})
    assert not inline_possible("default", "default"), "a pooled connection is lent to others"
    assert isinstance(QuietWorker().thread.worker._listener, Listener)


def test_an_idle_worker_whose_connection_is_cut_listens_again_and_wakes_at_notify(
    quiet_worker: Callable[[], QuietWorker], caplog: pytest.LogCaptureFixture
) -> None:
    """The idle loop waits on its connection's socket: cut under it, the wait ends, the
    loop reconnects, LISTENs again (and looks once) and a new job is woken by its
    NOTIFY, not by the 30 s poll ceiling."""
    from django_jobqueue.worker import LISTENING
    from tests.concurrency.procs import terminate_other_backends

    caplog.set_level(logging.INFO, logger="django_jobqueue")
    w = quiet_worker()
    assert caplog.text.count(LISTENING) == 1
    assert terminate_other_backends() >= 1
    wait_for(lambda: caplog.text.count(LISTENING) >= 2, timeout=10)
    assert "database error (the connection was lost while the loop waited" in caplog.text
    assert "database connection restored" in caplog.text
    time.sleep(0.3)  # idle again, past the look that listening anew gives
    before = time.monotonic()
    fresh = tasks.record.enqueue(n=1)
    latency = (started_at(fresh.id).started_at - fresh.job.created_at).total_seconds()
    assert latency < 1.0, f"started {latency:.3f}s after enqueue, not at its NOTIFY"
    assert w.queue_notes(since=before)


@pytest.mark.parametrize("task", [tasks.add, tasks.async_add], ids=["thread", "event-loop"])
def test_an_idle_worker_with_both_pools_takes_a_job_of_either_at_its_notify(
    task: Any, quiet_worker: Callable[[], QuietWorker]
) -> None:
    """An idle worker's ready claim is its first pool's (``Turns._make_ready``); a job
    for the other pool is claimed right after it, in the same wake-up, as a turn would
    claim it: at the NOTIFY, not at the 30 s poll ceiling."""
    w = quiet_worker()
    assert {d.asynchronous for d in registry} == {True, False}, "both pools in this worker"
    before = time.monotonic()
    handle = task.enqueue(a=1, b=2)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=5)
    assert time.monotonic() - before < 5
    assert w.queue_notes(since=before)
    # Idle again, its next claim made ready before it waits.
    wait_for(lambda: w.thread.worker._ready is not None, timeout=5)
