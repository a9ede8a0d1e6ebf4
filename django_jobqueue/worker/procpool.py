"""The process pool (``runworker --pool process``): each slot thread runs its jobs in a
child process of its own instead of on itself.

The slot threads stay (``Slots``): they take the runs the loop submits, and each hands
its run to its child (``worker.child``) and waits for what it came to, forwarding a
cancel to the child and the progress the child reports to the run's context, which the
worker's progress service writes as for any run. The loop still does every claim and
every settlement: the child returns the run's ending, as a slot thread would.

Children are started with ``multiprocessing``'s ``spawn``: a fresh interpreter, not a
fork of a worker that already holds database connections, a listener thread and
locks (a fork would copy them mid-use). The cost is a second or so of Django start-up
per child, paid once per child, not per job.

A run past its hard limit (or terminated) is ``abandon``ed: its child gets SIGTERM,
then SIGKILL after ``KILL_GRACE``, and a new slot thread with a new child takes the
slot. A child that dies on its own (killed, out of memory, a crash in C) is seen at
once by the thread waiting on it: the run ends as a stale recovery, settled by the
loop's next turn under the run's guard, its note naming the cause. A child is recycled
after ``max_tasks`` runs, or once the resident memory it reports after a run passes
``max_memory_mib``.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial

from django_jobqueue.rules.lifecycle import Policy
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.context import Context
from django_jobqueue.run.pipeline import Ended, Pipeline
from django_jobqueue.store import Claimed
from django_jobqueue.worker import child as child_main
from django_jobqueue.worker.services.base import Running
from django_jobqueue.worker.sizing import Pace
from django_jobqueue.worker.slots import Slots
from django_jobqueue.worker.supervisor import reason

logger = logging.getLogger("django_jobqueue")

# Seconds between the SIGTERM that stops a run's child and the SIGKILL that makes sure.
KILL_GRACE = 1.0
# How long a child may take to start a run sent to it (Django's start-up for a new one)
# before it is killed and the run recovered: the hard limit counts from the start only.
START_TIMEOUT = 120
# How often a slot thread waiting on its child looks at the run's cancel flag.
WAIT_STEP = 0.2


class Child:
    """One child process, as its slot thread sees it."""

    def __init__(self, config: child_main.Config) -> None:
        mp = multiprocessing.get_context("spawn")
        self.conn, theirs = mp.Pipe()
        # Not a daemon: a daemon cannot start processes of its own, and a task may.
        # The worker stops its children itself, and a child whose worker is gone exits.
        self.process = mp.Process(
            target=child_main.main, args=(theirs, config), name="jobqueue-child", daemon=False
        )
        self.process.start()
        theirs.close()
        self.tasks = 0
        self.rss_mib: float | None = None  # what it reported after its last run
        self.killed_by_us = False

    @property
    def pid(self) -> int:
        return int(self.process.pid or 0)

    def run(
        self, job: Claimed, ctx: Context, soft: float | None, started: Callable[[], None]
    ) -> Ended | None:
        """Run ``job`` in the child (``started`` is called when it starts there); None if
        the child died before it answered."""
        key = (job.id, job.run_count)
        try:
            self.conn.send(("run", job, soft))
        except OSError:
            return None
        cancel_sent = False
        sent_at: float | None = time.monotonic()  # None once it started
        while True:
            if sent_at is not None and time.monotonic() - sent_at > START_TIMEOUT:
                logger.error(
                    "process-pool child %d did not start a run in %ds", self.pid, START_TIMEOUT
                )
                self.kill(0)
                return None
            if not cancel_sent and ctx.cancelled.is_set():
                cancel_sent = True
                with contextlib.suppress(OSError):
                    self.conn.send(("cancel", *key))
            try:
                if not self.conn.poll(WAIT_STEP):
                    continue
                message = self.conn.recv()
            except (EOFError, OSError):
                return None
            if message[0] == "ended":
                self.tasks += 1
                self.rss_mib = message[2]
                ended: Ended = message[1]
                return ended
            if message[0] == "started" and (message[1], message[2]) == key:
                sent_at = None
                started()
            elif message[0] == "progress" and (message[1], message[2]) == key:
                progress = message[3]
                ctx.progress(progress.done, progress.total, progress.note)

    def kill(self, grace: float = KILL_GRACE) -> None:
        """SIGTERM now, SIGKILL after ``grace`` if it is still there."""
        self.killed_by_us = True
        with contextlib.suppress(ProcessLookupError, TypeError):
            os.kill(self.pid, signal.SIGTERM)
        timer = threading.Timer(grace, self._finish)
        timer.daemon = True
        timer.start()

    def _finish(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(self.pid, signal.SIGKILL)
        self.process.join(5)

    def stop(self) -> None:
        """Ask an idle child to exit; kill it if it has not within the grace."""
        with contextlib.suppress(OSError):
            self.conn.send(("stop",))
        self.process.join(KILL_GRACE)
        if self.process.is_alive():
            self.kill(0)
        self.conn.close()

    def death(self) -> str:
        """Why the child ended, in words (its exit status, its last memory)."""
        self.process.join(1.0)
        code = self.process.exitcode
        cause = "is gone" if code is None else reason(code)
        if self.rss_mib is not None:
            cause += f", {self.rss_mib:.0f} MiB resident after its last run"
        return cause


class ProcessSlots(Slots):
    """``Slots`` whose threads run their jobs in child processes."""

    def __init__(
        self,
        *,
        pipe: Pipeline,
        on_result: Callable[[], None],
        max_tasks: int | None = None,
        max_memory_mib: int | None = None,
        pace: Pace | None = None,
    ) -> None:
        super().__init__(run=self._run_in_child, on_result=on_result, pace=pace)
        self.pipe = pipe
        self.config = child_main.Config(pipe.worker_id, pipe.alias, pipe.max_output_bytes)
        self.max_tasks = max_tasks
        self.max_memory_mib = max_memory_mib
        self._local = threading.local()
        # The child running each run that is going, by (job id, run number).
        self._going: dict[tuple[uuid.UUID, int], Child] = {}
        # The runs submitted and not yet ended, by (job id, run number).
        self._runs: dict[tuple[uuid.UUID, int], Running] = {}
        self._children: set[Child] = set()

    def submit(self, running: Running) -> None:
        self._runs[(running.job.id, running.job.run_count)] = running
        super().submit(running)

    def withdraw(self, *, waited: float = 0.0) -> list[Running]:
        taken = super().withdraw(waited=waited)
        for running in taken:
            self._runs.pop((running.job.id, running.job.run_count), None)
        return taken

    def _run_started(self, key: tuple[uuid.UUID, int], policy: Policy) -> None:
        """The run started in its child: its hard limit counts from now (a new child's
        Django start-up, a second or more on a busy host, is not the run's time)."""
        running = self._runs.get(key)
        limit = policy.hard_limit()
        if running is not None and limit is not None:
            running.deadline = time.monotonic() + limit[0].total_seconds()
            self.on_result()  # the loop's wait is cut short to the new deadline

    def _loop(self) -> None:
        self._own_child()  # started with its thread, not when the first job comes
        try:
            super()._loop()
        finally:
            mine: Child | None = getattr(self._local, "child", None)
            if mine is not None:
                self._children.discard(mine)
                mine.stop()

    def _own_child(self) -> Child:
        mine: Child | None = getattr(self._local, "child", None)
        if mine is None or not mine.process.is_alive():
            mine = self._local.child = Child(self.config)
            self._children.add(mine)
            logger.info("process-pool child started (pid %d)", mine.pid)
        return mine

    def _run_in_child(self, job: Claimed, ctx: Context, guard: ThreadConnections) -> Ended:
        mine = self._own_child()
        key = (job.id, job.run_count)
        with self._lock:
            if key in self._abandoned:  # given up on while its thread took it: never run
                return self.pipe.died(job, note="given up on before its child started it")
            self._going[key] = mine
        policy = self.pipe.policy(job.kind)
        soft = policy.soft_time_limit.total_seconds() if policy.soft_time_limit else None
        try:
            ended = mine.run(job, ctx, soft, partial(self._run_started, key, policy))
        finally:
            with self._lock:
                self._going.pop(key, None)
            self._runs.pop(key, None)
        if ended is None:
            self._local.child = None
            self._children.discard(mine)
            return self._died(job, mine)
        self._recycle(mine)
        return ended

    def _recycle(self, mine: Child) -> None:
        why = None
        if self.max_tasks is not None and mine.tasks >= self.max_tasks:
            why = f"ran its {mine.tasks} jobs (--max-tasks-per-child)"
        elif self.max_memory_mib is not None and (mine.rss_mib or 0) > self.max_memory_mib:
            why = f"holds {mine.rss_mib:.0f} MiB (--max-memory-per-child {self.max_memory_mib})"
        if why is not None:
            logger.info("process-pool child %d %s: replaced", mine.pid, why)
            self._local.child = None
            self._children.discard(mine)
            mine.stop()
            self._own_child()

    def _died(self, job: Claimed, mine: Child) -> Ended:
        """A run whose child died under it: recovered at once (``Pipeline.died``), its
        note naming the cause."""
        cause = mine.death()
        if not mine.killed_by_us:
            logger.warning(
                "process-pool child %d %s while it ran job=%s kind=%s run=%d: recovering it",
                mine.pid,
                cause,
                job.id,
                job.kind,
                job.run_count,
            )
        return self.pipe.died(
            job, note=f"its process-pool child (pid {mine.pid}) {cause}; recovered at once"
        )

    def abandon(self, running: Running) -> str:
        """Give up on a run: its child is killed (SIGTERM, then SIGKILL after
        ``KILL_GRACE``) and a new thread with a new child takes its slot."""
        super().abandon(running)
        with self._lock:
            mine = self._going.get((running.job.id, running.job.run_count))
        if mine is None:
            return "before it started"
        mine.kill()
        return f"its process-pool child (pid {mine.pid}) killed"

    def stop(self) -> None:
        """Stop every thread and kill every child: a run still going at the worker's end
        was handed back (released) and must not run on beside its next run."""
        super().stop()
        for mine in list(self._children):
            if mine.process.is_alive():
                with contextlib.suppress(ProcessLookupError, TypeError):
                    os.kill(mine.pid, signal.SIGKILL)
