"""pgqueuer's enqueue side: ``Queries`` over one asyncpg connection (autocommit)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped,unused-ignore]
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

from bench.clients import WARMUP, paced

T = TypeVar("T")
CHUNK = 10_000  # preload batch size


class Session:
    """One asyncpg connection and the event loop it lives on, for synchronous callers.

    Timed loops run as one coroutine (``run(work())``), so no event-loop hop is timed.
    """

    def __enter__(self) -> Session:
        self.loop = asyncio.new_event_loop()
        self.connection = self.run(asyncpg.connect(os.environ["DATABASE_URL"]))
        self.queries = Queries(AsyncpgDriver(self.connection))
        return self

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(work)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.run(self.connection.close())
        self.loop.close()


def install() -> None:
    with Session() as s:
        s.run(s.queries.install())


def enqueue_each(n: int) -> float:
    """``Queries.enqueue`` once per job, each call its own transaction."""
    with Session() as s:

        async def work() -> float:
            for _ in range(WARMUP):
                await s.queries.enqueue("noop", None)
            start = time.perf_counter()
            for _ in range(n):
                await s.queries.enqueue("noop", None)
            return time.perf_counter() - start

        return s.run(work())


def enqueue_bulk(n: int) -> float:
    """One ``Queries.enqueue`` call with lists of ``n``."""
    with Session() as s:

        async def work() -> float:
            await s.queries.enqueue(["noop"] * WARMUP, [None] * WARMUP, [0] * WARMUP)
            entrypoints, priorities = ["noop"] * n, [0] * n
            payloads: list[bytes | None] = [None] * n
            start = time.perf_counter()
            await s.queries.enqueue(entrypoints, payloads, priorities)
            return time.perf_counter() - start

        return s.run(work())


def preload(n: int) -> None:
    with Session() as s:
        for offset in range(0, n, CHUNK):
            size = min(CHUNK, n - offset)
            s.run(s.queries.enqueue(["noop"] * size, [None] * size, [0] * size))


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    with Session() as s:

        def submit(label: str) -> None:
            s.run(s.queries.enqueue("stamp", label.encode()))

        return paced(count, gap, warmup, submit)


def preload_work(task: str, n: int, kwargs: dict[str, object]) -> None:
    """``n`` jobs of the entrypoint ``task`` (bench.pgq_worker), its payload the ``ms``."""
    payload = str(kwargs["ms"]).encode()
    with Session() as s:
        for offset in range(0, n, CHUNK):
            size = min(CHUNK, n - offset)
            s.run(s.queries.enqueue([task] * size, [payload] * size, [0] * size))
