"""The worker's slot threads without a database: runs handed in come back out, each
thread runs one job at a time, and a run given up on is replaced at once. Real threads
running real tasks through the run pipeline (tasks that touch no connection)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_jobqueue import task
from django_jobqueue.run.pipeline import Ended, Pipeline
from django_jobqueue.states import Status
from django_jobqueue.task.registry import registry
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.sizing import PACE_SAMPLE, Pace
from django_jobqueue.worker.slots import Slots
from tests.helpers import claimed

WAIT = 10.0  # seconds: the longest any step here may take before the test fails
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Gates:
    """What the gated task sees: one event per job name, and who ran what, when."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.gates: dict[str, threading.Event] = {}
        self.events: list[tuple[str, str, int]] = []  # (what, name, thread id)
        self.changed = threading.Condition(self.lock)

    def gate(self, name: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(name, threading.Event())

    def note(self, what: str, name: str) -> None:
        with self.changed:
            self.events.append((what, name, threading.get_ident()))
            self.changed.notify_all()

    def wait_for(self, count: int, what: str) -> list[tuple[str, str, int]]:
        with self.changed:
            assert self.changed.wait_for(
                lambda: sum(e[0] == what for e in self.events) >= count, WAIT
            ), f"fewer than {count} {what} events: {self.events}"
            return [e for e in self.events if e[0] == what]


GATES = Gates()


@pytest.fixture(autouse=True)
def kinds() -> Iterator[None]:
    global GATES
    GATES = Gates()
    with registry.isolated():

        @task(kind="unit.gated")
        def gated(name: str) -> str:
            GATES.note("start", name)
            opened = GATES.gate(name).wait(WAIT)
            GATES.note("end", name)
            return name if opened else "never opened"

        @task(kind="unit.double")
        def double(n: int) -> int:
            return n * 2

        @task(kind="unit.raises")
        def raises() -> None:
            raise LookupError("gone")

        yield


class Results:
    """The results a pool hands back, collected as ``on_result`` says they are in."""

    def __init__(self) -> None:
        self.ready = threading.Semaphore(0)
        self.slots: Slots | None = None

    def on_result(self) -> None:
        self.ready.release()

    def take(self, count: int) -> list[Ended]:
        assert self.slots is not None
        for _ in range(count):
            assert self.ready.acquire(timeout=WAIT), "a result did not come back"
        return list(self.slots.results())


@pytest.fixture
def pool() -> Iterator[tuple[Slots, Results, Pipeline]]:
    pipe = Pipeline(worker_id="host:1", alias="default", max_output_bytes=1024 * 1024)
    results = Results()
    slots = Slots(run=pipe.run_one, on_result=results.on_result)
    results.slots = slots
    yield slots, results, pipe
    for gate in GATES.gates.values():
        gate.set()
    slots.stop()
    for thread in slots._threads:
        thread.join(WAIT)


def _running(pipe: Pipeline, kind: str, **payload: Any) -> Running:
    job = claimed(kind, payload=payload, at=NOW, claimed_by=pipe.worker_id)
    return Running(job=job, ctx=pipe.context(job), lease=timedelta(minutes=1), expires_at=NOW)


def test_runs_handed_in_come_back_out_settled_by_the_pipeline(
    pool: tuple[Slots, Results, Pipeline],
) -> None:
    slots, results, pipe = pool
    slots.start(2)
    handed = [_running(pipe, "unit.double", n=n) for n in range(5)]
    for r in handed:
        slots.submit(r)
    ended = results.take(5)
    assert sorted(e.result.value for e in ended) == [0, 2, 4, 6, 8]
    assert {e.result.job.id for e in ended} == {r.job.id for r in handed}
    for e in ended:
        assert e.settlement is not None
        assert (e.settlement.status, e.settlement.job_id) == (Status.COMPLETED, e.result.job.id)
    assert list(slots.results()) == []  # never blocks: nothing more is in


def test_each_slot_runs_one_job_at_a_time(pool: tuple[Slots, Results, Pipeline]) -> None:
    slots, results, pipe = pool
    slots.start(2)
    for name in "abcd":
        slots.submit(_running(pipe, "unit.gated", name=name))
    first = GATES.wait_for(2, "start")
    assert len({thread for _, _, thread in first}) == 2, "two slots, two threads"
    time.sleep(0.1)  # time enough for a third run to start, were a slot to take two
    assert len(GATES.wait_for(0, "start")) == 2, "no third run while both slots are busy"
    GATES.gate(first[0][1]).set()
    third = GATES.wait_for(3, "start")[2]
    assert third[2] == first[0][2], "the slot that freed up takes the next run"
    for name in "abcd":
        GATES.gate(name).set()
    ended = results.take(4)
    assert sorted(e.result.value for e in ended) == ["a", "b", "c", "d"]
    # On each thread, every run ended before the next began.
    by_thread: dict[int, list[str]] = {}
    for what, _, thread in GATES.events:
        by_thread.setdefault(thread, []).append(what)
    for sequence in by_thread.values():
        assert sequence == ["start", "end"] * (len(sequence) // 2)


def test_an_abandoned_run_is_replaced_at_once_and_its_thread_exits_when_it_returns(
    pool: tuple[Slots, Results, Pipeline],
) -> None:
    slots, results, pipe = pool
    slots.start(1)
    stuck = _running(pipe, "unit.gated", name="stuck")
    slots.submit(stuck)
    GATES.wait_for(1, "start")
    slots.abandon(stuck)
    slots.submit(_running(pipe, "unit.double", n=4))
    [ended] = results.take(1)
    assert ended.result.value == 8, "the replacement ran the next job beside the stuck one"
    old, new = slots._threads
    assert old.is_alive()
    assert new.is_alive()
    GATES.gate("stuck").set()
    [late] = results.take(1)
    assert late.result.job.id == stuck.job.id  # handed back; the worker drops it
    old.join(WAIT)
    assert not old.is_alive(), "the abandoned run's thread exits once its run returned"
    assert new.is_alive()


def test_a_failing_task_comes_back_as_a_failed_run_and_the_slot_lives_on(
    pool: tuple[Slots, Results, Pipeline],
) -> None:
    slots, results, pipe = pool
    slots.start(1)
    slots.submit(_running(pipe, "unit.raises"))
    slots.submit(_running(pipe, "unit.double", wrong=1))  # no such argument
    slots.submit(_running(pipe, "unit.double", n=1))
    failed, mismatch, after = results.take(3)
    assert failed.result.end == "failed"
    assert failed.settlement is not None
    assert (failed.settlement.status, failed.settlement.failed) == (Status.PENDING, True)
    assert "LookupError: gone" in failed.settlement.note
    assert mismatch.result.end == "mismatch"
    assert mismatch.settlement is not None
    assert mismatch.settlement.status == Status.DEAD
    assert after.result.value == 2
    [thread] = slots._threads
    assert thread.is_alive()


def test_stop_ends_every_idle_thread(pool: tuple[Slots, Results, Pipeline]) -> None:
    slots, _, _ = pool
    slots.start(3)
    slots.stop()
    for thread in slots._threads:
        thread.join(WAIT)
    assert not any(t.is_alive() for t in slots._threads)


def test_runs_ending_while_others_wait_measure_the_slots_pace() -> None:
    pipe = Pipeline(worker_id="host:1", alias="default", max_output_bytes=1024 * 1024)
    results = Results()
    reported: list[float] = []
    slots = Slots(run=pipe.run_one, on_result=results.on_result, pace=Pace(reported.append))
    results.slots = slots
    slots.start(1)
    try:
        slots.submit(_running(pipe, "unit.gated", name="first"))
        GATES.wait_for(1, "start")
        for n in range(2 * PACE_SAMPLE):  # queued behind the first: the one slot is busy
            slots.submit(_running(pipe, "unit.double", n=n))
        assert reported == [], "no run has ended yet"
        GATES.gate("first").set()
        results.take(2 * PACE_SAMPLE + 1)
        assert reported, "the slot ran queued runs back to back: a pace"
        assert all(0 < seconds < WAIT for seconds in reported)
    finally:
        slots.stop()
        for thread in slots._threads:
            thread.join(WAIT)


class CountedInbox:
    """The slots' queue, counting the runs taken off it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.gets = 0

    def get(self, *args: Any, **kwargs: Any) -> Any:
        self.gets += 1
        return self.inner.get(*args, **kwargs)

    def put(self, item: Any) -> None:
        self.inner.put(item)


def test_withdraw_takes_back_only_runs_that_waited_long_enough_and_leaves_the_rest_queued(
    pool: tuple[Slots, Results, Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    slots, results, pipe = pool
    slots.start(1)
    busy = _running(pipe, "unit.gated", name="busy")
    slots.submit(busy)
    GATES.wait_for(1, "start")  # the one thread is taken: the next runs wait in the queue
    first, second = _running(pipe, "unit.double", n=1), _running(pipe, "unit.double", n=2)
    slots.submit(first)
    slots.submit(second)
    inbox = CountedInbox(slots._inbox)
    monkeypatch.setattr(slots, "_inbox", inbox)
    assert slots.withdraw(waited=60.0) == []
    assert inbox.gets == 0, "nothing waited a minute: the queue is not even looked through"
    later = time.monotonic() + 120.0
    monkeypatch.setattr(time, "monotonic", lambda: later)
    withdrawn = slots.withdraw(waited=60.0)
    assert [r.job.id for r in withdrawn] == [first.job.id, second.job.id]
    monkeypatch.undo()
    GATES.gate("busy").set()
    [ended] = results.take(1)
    assert ended.result.value == "busy", "withdrawn runs never run"
    assert list(slots.results()) == []
