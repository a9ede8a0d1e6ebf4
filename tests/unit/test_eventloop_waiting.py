"""The event loop's waiting runs (its claim buffer): at most ``limit`` go at once, the
rest start as others end, and one is either started or withdrawn, never both."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from django_jobqueue.worker.eventloop import EventLoop
from tests.helpers import wait_for


class _Job:
    def __init__(self, n: int) -> None:
        self.n = n
        self.id = n
        self.run_count = 1


class _Running:
    def __init__(self, n: int) -> None:
        self.job = _Job(n)
        self.ctx = None


def _loop(limit: int) -> tuple[EventLoop, list[int], threading.Event]:
    started: list[int] = []
    gate = threading.Event()

    async def run(job: Any, ctx: Any) -> Any:
        started.append(job.n)
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return None

    loop = EventLoop(run=run, on_result=lambda: None, db_threads=1, limit=limit)
    loop.start()
    return loop, started, gate


def test_runs_past_the_limit_wait_and_start_as_others_end() -> None:
    loop, started, gate = _loop(limit=2)
    try:
        for n in range(5):
            loop.submit(_Running(n))  # type: ignore[arg-type]
        wait_for(lambda: sorted(started) == [0, 1], timeout=10)
        time.sleep(0.1)
        assert sorted(started) == [0, 1], "no more than the limit at once"
        assert loop.longest_run() > 0
        gate.set()
        wait_for(lambda: sorted(started) == [0, 1, 2, 3, 4], timeout=10)
    finally:
        gate.set()
        loop.stop(timeout=5)


def test_a_waiting_run_is_either_started_or_withdrawn_never_both() -> None:
    loop, started, gate = _loop(limit=1)
    try:
        for n in range(4):
            loop.submit(_Running(n))  # type: ignore[arg-type]
        wait_for(lambda: started == [0], timeout=10)
        assert loop.withdraw(waited=60) == [], "none has waited a minute"
        withdrawn = loop.withdraw()
        assert sorted(r.job.n for r in withdrawn) == [1, 2, 3]  # type: ignore[attr-defined]
        gate.set()
        time.sleep(0.3)
        assert started == [0], "a withdrawn run never starts"
    finally:
        gate.set()
        loop.stop(timeout=5)


def test_a_waiting_run_given_up_on_never_starts() -> None:
    loop, started, gate = _loop(limit=1)
    try:
        first, second = _Running(0), _Running(1)
        loop.submit(first)  # type: ignore[arg-type]
        loop.submit(second)  # type: ignore[arg-type]
        wait_for(lambda: started == [0], timeout=10)
        loop.abandon(second)  # type: ignore[arg-type]
        gate.set()
        time.sleep(0.3)
        assert started == [0]
        assert loop.withdraw() == []
    finally:
        gate.set()
        loop.stop(timeout=5)
