"""``JobHandle.wait`` and ``await_result``: woken by the settlement's NOTIFY on
PostgreSQL (through the process's one listener), polling with backoff elsewhere.

What tells the two apart by a wide margin: a wait given ``interval=30`` would, if it
polled, read the job at its start and then not for 30 s; woken by the notification it
returns within seconds of the settlement, having read the job a handful of times."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_jobqueue import Status, cancel, chain
from django_jobqueue.store import listening, wakeups
from tests.helpers import WorkerThread, is_postgres, postgres_only
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _listener() -> Iterator[None]:
    yield
    listening.stop_all()  # its connection closed before the test database goes


def _job_reads(queries: CaptureQueriesContext) -> int:
    return sum(1 for q in queries.captured_queries if "django_jobqueue_job" in q["sql"])


@postgres_only
def test_wait_is_woken_by_the_settlement_not_by_polling(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = tasks.timed_sleep.enqueue(seconds=1.5)
    worker_thread(concurrency=2)
    began = time.monotonic()
    with CaptureQueriesContext(connection) as queries:
        handle.wait(timeout=60, interval=30)
    took = time.monotonic() - began
    assert handle.status == Status.COMPLETED
    # A poll every 30 s would have returned at 30 s; the notification well before.
    assert took < 15, f"wait took {took:.1f}s: it polled"
    # One read at the start, one after the listener connected (``RESYNC``), one after
    # each notification naming the job: never a loop of reads while the job ran.
    assert _job_reads(queries) <= 5, queries.captured_queries


@postgres_only
def test_one_listener_connection_serves_every_waiter_of_the_process(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handles = [tasks.timed_sleep.enqueue(seconds=0.5) for _ in range(6)]
    before = listening.hub().connections
    subs = [listening.subscribe([wakeups.SETTLED_CHANNEL]) for _ in range(20)]
    worker_thread(concurrency=6)
    for h in handles:
        h.wait(timeout=60)
    hub = listening.hub()
    assert hub.connections == before + 1
    assert hub.subscribers() == 20  # the waits' own subscriptions ended with them
    for s in subs:
        s.close()
        assert any(str(h.id) in n.payload for n in s.pending() for h in handles)


def test_wait_polls_with_backoff_where_nothing_notifies(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = tasks.add.enqueue(a=2, b=3)
    worker_thread(concurrency=2)
    assert handle.wait(timeout=60) is handle
    assert handle.status == Status.COMPLETED
    assert handle.result == 5


def test_wait_raises_timeout_error_naming_the_job_and_the_timeout() -> None:
    handle = tasks.add.enqueue(a=1, b=1)  # no worker: it stays pending
    began = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"job {handle.id} did not finish within 0.3 seconds"):
        handle.wait(timeout=0.3)
    assert time.monotonic() - began < 10
    assert handle.refresh().status == Status.PENDING


def test_wait_on_a_finished_job_returns_at_once() -> None:
    handle = tasks.add.enqueue(a=1, b=1)
    cancel(job_id=handle.id)
    assert handle.wait(timeout=0).status == Status.CANCELLED


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"timeout": -1}, ValueError, "timeout must be 0 or more seconds, not -1"),
        ({"timeout": "5"}, TypeError, "timeout must be a number of seconds or None, not '5'"),
        ({"timeout": True}, TypeError, "timeout must be a number of seconds or None, not True"),
        ({"timeout": float("nan")}, TypeError, "timeout must be a number"),
        ({"interval": 0}, ValueError, "interval must be greater than 0 seconds, not 0"),
    ],
)
def test_wait_refuses_a_bad_timeout_or_interval(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    handle = tasks.add.enqueue(a=1, b=1)
    with pytest.raises(error, match=message):
        handle.wait(**kwargs)  # type: ignore[arg-type]


def test_await_result_returns_the_result_without_blocking_the_event_loop(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = tasks.timed_sleep.enqueue(seconds=0.5)
    added = tasks.add.enqueue(a=20, b=22)
    worker_thread(concurrency=2)

    async def both() -> tuple[object, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        try:
            await handle.await_result(timeout=60)
            return await added.await_result(timeout=60), ticks
        finally:
            ticker.cancel()

    result, ticks = asyncio.run(both())
    assert result == 42
    assert ticks > 10  # the loop kept running while the job did


def test_await_result_raises_timeout_error() -> None:
    handle = tasks.add.enqueue(a=1, b=1)
    with pytest.raises(TimeoutError, match=str(handle.id)):
        asyncio.run(handle.await_result(timeout=0.3))


def test_listening_is_supported_exactly_on_postgresql() -> None:
    assert listening.supported() is is_postgres()


def test_the_listener_refuses_an_unknown_channel_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="no such channel: nope; the queue notifies on django"):
        listening.hub().subscribe(["nope"])
    assert listening.hub().subscribers() == 0


@postgres_only
def test_the_listener_reconnects_and_says_read_again(caplog: pytest.LogCaptureFixture) -> None:
    sub = listening.subscribe([wakeups.SETTLED_CHANNEL])
    assert sub.live
    assert sub.get(5) == listening.RESYNC  # a new connection: "read again"
    hub = listening.hub()
    made = hub.connections
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
        )
    assert sub.get(30) == listening.RESYNC  # reconnected: what it missed is read again
    assert hub.connections == made + 1
    handle = tasks.add.enqueue(a=1, b=1)
    cancel(job_id=handle.id)  # announced on commit
    note = sub.get(30)
    assert note is not None
    assert note.channel == wakeups.SETTLED_CHANNEL
    assert note.payload == str(handle.id)
    sub.close()
    assert "listener connection lost; reconnecting" in caplog.text


def test_a_wait_on_a_step_wakes_when_its_parents_death_cancels_it(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    flow = chain(tasks.permanent.s(), tasks.add.s(a=1, b=1), name="doomed").enqueue()
    [(_, child)] = [(n, h) for n, h in flow.steps.items() if h.kind == tasks.add.kind]
    worker_thread(concurrency=2)
    began = time.monotonic()
    # PostgreSQL: a poll every 30 s would read again only at 30 s; the cancellation's
    # announcement wakes it. Elsewhere: polled with backoff.
    interval = 30.0 if is_postgres() else None
    assert child.wait(timeout=60, interval=interval).status == Status.CANCELLED
    assert time.monotonic() - began < 25
