"""The worker's slot threads: each runs one job at a time and hands back what it came to.

Runs go in through ``submit`` and come back out of ``results()``; the loop thread never
runs task code. A run given up on at its timeout is ``abandon``ed: a new thread takes
its place at once (a thread cannot be stopped), and the old one exits when, if ever,
its run returns; the worker drops that late result. After each run, and before the
loop sees its result, the thread's connections are left clean for the next one
(``run.connguard``, through the run pipeline).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from django.db import connections

from django_jobqueue import clock
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.pipeline import Ended, RunOne
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.sizing import Pace


def drained(outbox: queue.SimpleQueue[Ended]) -> Iterator[Ended]:
    """What is in ``outbox`` now, taken out; never blocks (the slots' and the event
    loop's ended runs, read by the loop thread)."""
    while True:
        try:
            yield outbox.get(block=False)
        except queue.Empty:
            return


class Slots:
    """A pool of daemon threads running jobs with ``run`` (the pipeline's ``run_one``);
    ``on_result`` is called after each run, and ``pace`` (the claim buffer's measure of
    how fast the threads get through queued runs) told when each run ends."""

    def __init__(
        self, *, run: RunOne, on_result: Callable[[], None], pace: Pace | None = None
    ) -> None:
        self.run = run
        self.on_result = on_result
        self.pace = pace
        # SimpleQueue: a put or get is one C call, no Condition to notify per job.
        self._inbox: queue.SimpleQueue[Running | None] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[Ended] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # (job id, run number) of runs given up on: their threads exit when they return.
        self._abandoned: set[tuple[uuid.UUID, int]] = set()
        # (job id, run number) -> when it was submitted, for the runs not started yet.
        self._queued: dict[tuple[uuid.UUID, int], float] = {}
        # Runs given up on before any thread started them: skipped when reached.
        self._skip: set[tuple[uuid.UUID, int]] = set()
        self._lock = threading.Lock()
        # When each thread's current run started (by thread name).
        self._started: dict[str, float] = {}

    def start(self, count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(
                target=self._loop, name=f"jobqueue-slot-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, running: Running) -> None:
        self._queued[(running.job.id, running.job.run_count)] = time.monotonic()
        self._inbox.put(running)

    def longest_run(self) -> float:
        """Seconds the longest of the runs going on now has been going (0: none)."""
        started = list(self._started.values())
        return time.monotonic() - min(started) if started else 0.0

    def withdraw(self, *, waited: float = 0.0) -> list[Running]:
        """Take back the runs no thread has started that have waited ``waited`` seconds
        or more (all of them by default); the others keep their place in the queue. A
        run is either started by a thread or withdrawn here, never both: each is taken
        off the queue once."""
        if not self._queued:
            return []
        now = time.monotonic()
        if waited > 0:
            # Runs are queued in the order they were submitted, each once: if the first
            # has not waited that long, none has, and the queue is left alone (taking a
            # buffer of 256 off and back on at every turn stalled the threads meanwhile).
            with self._lock:
                oldest = next(iter(self._queued.values()), None)
            if oldest is None or now - oldest < waited:
                return []
        taken: list[Running | None] = []
        while True:
            try:
                taken.append(self._inbox.get(block=False))
            except queue.Empty:
                break
        out: list[Running] = []
        for running in taken:
            if running is None:  # a stop sentinel keeps its place
                self._inbox.put(running)
                continue
            key = (running.job.id, running.job.run_count)
            if now - self._queued.get(key, now) >= waited:
                self._queued.pop(key, None)
                out.append(running)
            else:
                self._inbox.put(running)
        return out

    def results(self) -> Iterator[Ended]:
        """The runs that ended since the last call (never blocks)."""
        return drained(self._outbox)

    def abandon(self, running: Running) -> str:
        """Give up on a run: its thread is replaced now and exits once the run returns;
        one no thread has started yet is skipped instead, and never runs. Returns how,
        in words, for its journal note."""
        key = (running.job.id, running.job.run_count)
        with self._lock:
            if self._queued.pop(key, None) is not None:
                self._skip.add(key)
                return "before it started"
            self._abandoned.add(key)
        self.start(1)
        return "its thread abandoned and whatever it returns dropped"

    def stop(self) -> None:
        """Tell every thread to exit once it is idle."""
        for _ in self._threads:
            self._inbox.put(None)

    def _loop(self) -> None:
        try:
            guard = ThreadConnections()
            while True:
                running = self._inbox.get()
                if running is None:
                    return
                job = running.job
                key = (job.id, job.run_count)
                with self._lock:
                    if self._skip and key in self._skip:
                        self._skip.discard(key)
                        continue
                    self._queued.pop(key, None)
                running.started_at = clock.now()
                name = threading.current_thread().name
                self._started[name] = time.monotonic()
                # The pipeline leaves the thread's connections clean before the loop
                # sees the result, so no settlement waits on what the run left open.
                ended = self.run(job, running.ctx, guard)
                self._started.pop(name, None)
                if self.pace is not None:
                    with self._lock:  # a run given up on returns late: not the pace
                        if not (self._abandoned and key in self._abandoned):
                            self.pace.ended(time.monotonic(), queued=bool(self._queued))
                self._outbox.put(ended)
                self.on_result()
                if self._abandoned and key in self._abandoned:
                    self._abandoned.discard(key)
                    return  # replaced when its run timed out
        finally:
            connections.close_all()
