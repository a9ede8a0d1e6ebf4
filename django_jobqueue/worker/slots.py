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
import uuid
from collections.abc import Callable, Iterator

from django.db import connections
from django.utils import timezone

from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.pipeline import Ended, RunOne
from django_jobqueue.worker.services.base import Running


class Slots:
    """A pool of daemon threads running jobs with ``run`` (the pipeline's ``run_one``);
    ``on_result`` is called after each run."""

    def __init__(self, *, run: RunOne, on_result: Callable[[], None]) -> None:
        self.run = run
        self.on_result = on_result
        # SimpleQueue: a put or get is one C call, no Condition to notify per job.
        self._inbox: queue.SimpleQueue[Running | None] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[Ended] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # (job id, run number) of runs given up on: their threads exit when they return.
        self._abandoned: set[tuple[uuid.UUID, int]] = set()

    def start(self, count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(
                target=self._loop, name=f"jobqueue-slot-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def submit(self, running: Running) -> None:
        self._inbox.put(running)

    def results(self) -> Iterator[Ended]:
        """The runs that ended since the last call (never blocks)."""
        while True:
            try:
                yield self._outbox.get(block=False)
            except queue.Empty:
                return

    def abandon(self, running: Running) -> None:
        """Give up on a run: its thread is replaced now and exits once the run returns."""
        self._abandoned.add((running.job.id, running.job.run_count))
        self.start(1)

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
                running.started_at = timezone.now()
                # The pipeline leaves the thread's connections clean before the loop
                # sees the result, so no settlement waits on what the run left open.
                self._outbox.put(self.run(job, running.ctx, guard))
                self.on_result()
                if (job.id, job.run_count) in self._abandoned:
                    self._abandoned.discard((job.id, job.run_count))
                    return  # replaced when its run timed out
        finally:
            connections.close_all()
