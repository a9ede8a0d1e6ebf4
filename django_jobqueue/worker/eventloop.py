"""The worker's event loop: every ``async def`` run of a worker process on one loop thread.

A thousand concurrent awaits cost a thousand coroutines, not a thousand threads and
event loops. Runs go in through ``submit`` and come back out of ``results()``, as with
the slot threads; the loop thread never touches the worker's own connection.

An async task's ORM calls (Django's ``a…`` methods, ``sync_to_async``) are
thread-sensitive: left alone, asgiref sends all of them to one shared thread, one at a
time, so 200 tasks each doing one query would wait on each other. Each run here gets one
of ``db_threads`` single-thread executors of its own instead (round robin), so queries
of different runs go side by side on at most ``db_threads`` threads (and connections),
while one run's calls stay on one thread, as Django expects. The executors start their
thread on first use: a run that makes no sync call costs no thread at all.

At most ``limit`` runs go at once (``ASYNC_CONCURRENCY``); the others wait their turn in
submission order, so that the worker may hold a claim buffer for the loop as for the
slot threads: a waiting run starts the moment another ends, without a round trip, and
``withdraw`` takes back the ones that waited too long (or all, at shutdown) before they
start. A run is either started or withdrawn, never both.

A run given up on at its timeout is cancelled (``abandon``): unlike a thread, a
coroutine can be stopped (one still waiting is dropped, and never starts). At ``stop``
whatever still runs (released by the worker already) is cancelled, nothing more starts,
then each executor's connections are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.db import connections

from django_jobqueue.run.connguard import close_broken
from django_jobqueue.run.pipeline import ARunOne, Ended
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.slots import drained

logger = logging.getLogger("django_jobqueue")

# Threads (each with its own database connections) the ORM calls of async runs share.
DB_THREADS = 8


# Stands for the loop until ``start``: calling it before then is a bug, and says so.
class _NotStarted:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"EventLoop.{name} used before start()")


_NOT_STARTED: Any = _NotStarted()


class EventLoop:
    """One asyncio loop on a daemon thread, running jobs with ``run`` (the pipeline's
    ``arun_one``); ``on_result`` is called after each run."""

    def __init__(
        self,
        *,
        run: ARunOne,
        on_result: Callable[[], None],
        db_threads: int,
        limit: int | None = None,
    ) -> None:
        self.run = run
        self.on_result = on_result
        self.limit = limit  # runs at once (None: no limit)
        # Submitted, not started yet: (run, when submitted); under _lock.
        self._waiting: deque[tuple[Running, float]] = deque()
        self._lock = threading.Lock()
        # When each run going on now started (loop thread only; read for longest_run).
        self._started: dict[tuple[uuid.UUID, int], float] = {}
        self._closing = False  # set by stop: nothing more starts
        self._outbox: queue.SimpleQueue[Ended] = queue.SimpleQueue()
        self._tasks: dict[tuple[uuid.UUID, int], asyncio.Task[None]] = {}
        self._executors = [
            ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"jobqueue-async-db-{i}")
            for i in range(db_threads)
        ]
        self._next = 0
        # Made at start: a worker built and never run must leave no unclosed loop (and
        # its self-pipe sockets) for the garbage collector to warn about.
        self._loop: asyncio.AbstractEventLoop = _NOT_STARTED
        self._thread = threading.Thread(target=self._serve, name="jobqueue-eventloop", daemon=True)

    def start(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread.start()

    def submit(self, running: Running) -> None:
        schedule = self._loop.call_soon_threadsafe  # fails before start, having queued nothing
        with self._lock:
            self._waiting.append((running, time.monotonic()))
        schedule(self._pump)

    def withdraw(self, *, waited: float = 0.0) -> list[Running]:
        """Take back the runs not started that have waited ``waited`` seconds or more
        (all of them by default); the others keep their place."""
        now = time.monotonic()
        with self._lock:
            # Oldest first (appended as submitted): if it has not waited that long, none has.
            if not self._waiting or now - self._waiting[0][1] < waited:
                return []
            taken = [r for r, since in self._waiting if now - since >= waited]
            if taken:
                self._waiting = deque((r, t) for r, t in self._waiting if now - t < waited)
        return taken

    def longest_run(self) -> float:
        """Seconds the longest of the runs going on now has been going (0: none)."""
        started = list(self._started.values())
        return time.monotonic() - min(started) if started else 0.0

    def results(self) -> Iterator[Ended]:
        """The runs that ended since the last call (never blocks)."""
        return drained(self._outbox)

    def abandon(self, running: Running) -> None:
        """Give up on a run: its coroutine is cancelled; what it comes to is dropped."""
        key = (running.job.id, running.job.run_count)
        with self._lock:
            for item in self._waiting:
                if item[0] is running:
                    self._waiting.remove(item)
                    return
        self._loop.call_soon_threadsafe(self._cancel, key)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what still runs, stop the loop, close the ORM threads' connections."""
        self._closing = True
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop).result(timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
        for executor in self._executors:
            with contextlib.suppress(Exception):
                executor.submit(connections.close_all).result(timeout)
            executor.shutdown(wait=False)

    # --- on the loop thread -----------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def _pump(self) -> None:
        """Start waiting runs while there is room."""
        while not self._closing and (self.limit is None or len(self._tasks) < self.limit):
            with self._lock:
                if not self._waiting:
                    return
                running, _ = self._waiting.popleft()
            self._begin(running)

    def _begin(self, running: Running) -> None:
        key = (running.job.id, running.job.run_count)
        self._started[key] = time.monotonic()
        executor = self._executors[self._next % len(self._executors)]
        self._next += 1
        task = self._loop.create_task(self._one(running, executor))
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._ended(key))

    def _ended(self, key: tuple[uuid.UUID, int]) -> None:
        self._tasks.pop(key, None)
        self._started.pop(key, None)
        self._pump()

    async def _one(self, running: Running, executor: ThreadPoolExecutor) -> None:
        async with _context(executor):
            ended = await self.run(running.job, running.ctx)
        if ended.result.end != "completed":
            # A failed run may have met a dead connection: dropped on its ORM thread,
            # so the runs that share the thread next connect afresh.
            with contextlib.suppress(Exception):
                await asyncio.get_running_loop().run_in_executor(executor, close_broken)
        self._outbox.put(ended)
        self.on_result()

    def _cancel(self, key: tuple[uuid.UUID, int]) -> None:
        task = self._tasks.get(key)
        if task is not None:
            task.cancel()

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _context(executor: ThreadPoolExecutor) -> Any:
    """The run's thread-sensitive context on ``executor`` (asgiref 3.10 and later take
    one; before, a context of its own: a thread per run that calls the ORM)."""
    try:
        return ThreadSensitiveContext(executor=executor)  # type: ignore[call-arg,unused-ignore]
    except TypeError:
        return ThreadSensitiveContext()
