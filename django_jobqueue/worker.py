"""The worker loop: claim → dispatch → settle, with wake-ups, leases and graceful shutdown.

One loop thread talks to the database through ``store``; jobs run on a fixed set of
daemon threads. The loop never dies of a lost database connection: it closes the
connection, backs off, and carries on, keeping unsettled results to write later.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue as queue_module
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from types import FrameType
from typing import Any, TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.utils import timezone

from . import conf, store
from .context import Context
from .executor import RunResult, decide, execute
from .lifecycle import Policy, Settlement, released
from .notify import Listener
from .store import Claimed
from .task import policy_for, registry

logger = logging.getLogger("django_jobqueue")

T = TypeVar("T")

RECOVER_EVERY = 1.0  # seconds between expired-lease sweeps
CANCEL_CHECK_EVERY = 1.0  # seconds between checks for operator cancels of running jobs
HEARTBEAT_EVERY = 10.0


def priority_floor(slot: int, ratio: int | None) -> int:
    """The lowest priority a claim slot prefers: every (ratio+1)-th slot lets the next tier
    go first, every (ratio+1)²-th the tier after it, so low tiers get a steady share."""
    if ratio is None:
        return 0
    period = ratio + 1
    if slot % (period * period) == period * period - 1:
        return 2
    if slot % period == period - 1:
        return 1
    return 0


@dataclass
class Running:
    job: Claimed
    ctx: Context
    lease: timedelta
    expires_at: datetime


class Worker:
    """Runs jobs until stopped (or, with ``burst``, until nothing is claimable)."""

    def __init__(
        self,
        *,
        queues: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        concurrency: int | None = None,
        caps: dict[str, int] | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        shutdown_timeout: float | None = None,
        poll_interval: float | None = None,
        worker_id: str | None = None,
    ) -> None:
        settings = conf.get()
        self.alias = settings.database
        self.queues = list(queues or [])
        unknown = sorted(set(kinds or []) - set(registry.kinds()))
        if unknown:
            raise ValueError(
                f"Unknown kind(s) {', '.join(unknown)}; known: {', '.join(registry.kinds())}"
            )
        self.kinds = list(kinds) if kinds else registry.kinds()
        self.concurrency = settings.concurrency if concurrency is None else concurrency
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be positive, got {self.concurrency}")
        self.caps = {**settings.kind_concurrency, **(caps or {})}
        self.leases = registry.leases()
        self._policies: dict[str, Policy] = {}
        self.burst = burst
        self.max_jobs = max_jobs
        self.shutdown_timeout = (
            settings.shutdown_timeout.total_seconds()
            if shutdown_timeout is None
            else shutdown_timeout
        )
        self.poll_interval = (
            settings.poll_interval.total_seconds() if poll_interval is None else poll_interval
        )
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval must be above 0 seconds, got {self.poll_interval}")
        self.priority_ratio = settings.priority_ratio
        self.retention = settings.retention
        self.retention_interval = settings.retention_interval.total_seconds()
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker_id = worker_id or f"{self.host}:{self.pid}"
        self.heartbeat_id = f"{self.worker_id}:{uuid.uuid4().hex[:8]}"

        self._wake = threading.Event()
        self._stopping = threading.Event()
        # SimpleQueue: a put or get is one C call, no Condition to notify per job.
        self._inbox: queue_module.SimpleQueue[Running | None] = queue_module.SimpleQueue()
        self._outbox: queue_module.SimpleQueue[RunResult] = queue_module.SimpleQueue()
        self._running: dict[uuid.UUID, Running] = {}
        self._unsettled: list[Settlement] = []
        self._threads: list[threading.Thread] = []
        self._listener = Listener(self.alias, self._on_notify)
        self._slot = 0
        self._db_failures = 0
        self.processed = 0
        self.claimed = 0
        self._last: dict[str, float] = {}
        self._signals = 0

    # --- public control -------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to shut down gracefully (what SIGTERM does)."""
        self._stopping.set()
        self._wake.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: graceful stop; a second one exits at once."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal: exiting now; running jobs recover when leases expire")
            os._exit(1)
        logger.info("signal %s: stopping (send again to exit at once)", signum)
        self.stop()

    def _on_notify(self, payload: str) -> None:
        if not payload or not self.queues or payload in self.queues:
            self._wake.set()

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped; returns how many jobs this worker settled."""
        logger.info(
            "worker %s starting: concurrency=%d queues=%s kinds=%d caps=%s",
            self.worker_id,
            self.concurrency,
            self.queues or "all",
            len(self.kinds),
            self.caps,
        )
        if not self.kinds:
            logger.warning(
                "no task kinds are registered, so this worker will claim nothing: "
                "is each app's tasks.py in INSTALLED_APPS and importable?"
            )
        self._db(
            lambda: store.register_worker(
                worker_id=self.heartbeat_id,
                host=self.host,
                pid=self.pid,
                queues=self.queues,
                kinds=self.kinds,
                concurrency=self.concurrency,
            )
        )
        self._listener.start()
        for n in range(self.concurrency):
            thread = threading.Thread(
                target=self._execute_loop, name=f"jobqueue-slot-{n}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        try:
            self._loop()
            self._shutdown()
        finally:
            self._listener.stop()
            for _ in self._threads:
                self._inbox.put(None)
            self._db(
                lambda: store.beat(
                    worker_id=self.heartbeat_id, jobs_done=self.processed, stopped=True
                )
            )
            connections[self.alias].close()
        logger.info("worker %s stopped after %d jobs", self.worker_id, self.processed)
        return self.processed

    def _loop(self) -> None:
        while not self._stopping.is_set():
            # Cleared before looking, so a wake-up that arrives while we work is kept
            # for the next wait instead of being lost.
            self._wake.clear()
            self._collect()
            self._maintain()
            if self._limit_reached() and not self._running:
                return
            settled, got, free = self._turn()
            if got < free and settled:
                # The claim ran beside the settlements, so it could not see the jobs they
                # sent back to pending (a retry without backoff, a pause): look again.
                continue
            if self.burst and not self._running and got == 0:
                self._flush()
                return
            if got and got == free:
                continue  # every slot taken: look again as soon as one frees up
            self._wait()

    def _wait(self) -> None:
        timeout = self.poll_interval
        now = time.monotonic()
        if self._running:
            timeout = min(timeout, RECOVER_EVERY, CANCEL_CHECK_EVERY)
            soonest = min(r.expires_at for r in self._running.values())
            # Wake in time to extend the closest lease.
            half = min(r.lease for r in self._running.values()) / 2
            until = (soonest - half - timezone.now()).total_seconds()
            timeout = min(timeout, max(until, 0.05))
        elif not self._limit_reached():
            # Idle: sleep until the next scheduled job, the next lease to recover, the
            # poll ceiling or a NOTIFY, whichever comes first.
            nxt, expiry = self._db(
                lambda: store.next_wakeup(kinds=self.kinds, queues=self.queues or None)
            ) or (None, None)
            if nxt is not None:
                timeout = min(timeout, max((nxt - timezone.now()).total_seconds(), 0.0))
            if expiry is not None:
                # Not before the recovery sweep is due again, so an expiry that another
                # worker is recovering right now does not make this one spin.
                since = now - self._last.get("recover", now - RECOVER_EVERY)
                until_expiry = (expiry - timezone.now()).total_seconds()
                timeout = min(timeout, max(until_expiry, RECOVER_EVERY - since, 0.05))
        # Heartbeats keep this worker listed as alive however long the poll ceiling.
        beat_due = HEARTBEAT_EVERY - (now - self._last.get("heartbeat", now))
        timeout = min(timeout, max(beat_due, 0.05))
        if self._unsettled:
            timeout = min(timeout, max(self._db_backoff(), 0.05))
        if timeout > 0:
            self._wake.wait(timeout)

    def _limit_reached(self) -> bool:
        return self.max_jobs is not None and self.claimed >= self.max_jobs

    # --- claiming ---------------------------------------------------------------------------

    def _turn(self, *, claim: bool = True) -> tuple[int, int, int]:
        """Settle the runs that ended and claim the slots that frees, in one round trip.

        Returns how many runs were settled, how many jobs were claimed and how many
        slots there were to fill.
        """
        retrying = self._db_failures and time.monotonic() < self._last.get("retry", 0)
        batch = [] if retrying else list(self._unsettled)
        free = self.concurrency - len(self._running) + len(batch)
        wanted = self._claim_options(free) if claim else None
        if not batch and wanted is None:
            return 0, 0, free
        result = self._db(
            partial(
                store.exchange,
                worker_id=self.worker_id,
                settlements=batch,
                **(wanted or {"limit": 0}),
            )
        )
        if result is None:
            return 0, 0, free  # database trouble: keep the settlements and try again
        applied, claimed = result
        self._settled(batch, applied)
        self._slot += len(claimed)
        for job in claimed:
            self._dispatch(job)
        return len(batch), len(claimed), free

    def _claim_options(self, free: int) -> dict[str, Any] | None:
        """What to claim for ``free`` slots: kinds, caps and each slot's priority floor."""
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed)
        if free <= 0:
            return None
        in_flight = Counter(r.job.kind for r in self._running.values())
        at_cap = {k for k, cap in self.caps.items() if in_flight[k] >= cap}
        limits = {k: cap - in_flight[k] for k, cap in self.caps.items() if k not in at_cap}
        floors = Counter(priority_floor(self._slot + i, self.priority_ratio) for i in range(free))
        # A floor only says which tier a slot prefers: slots its tiers cannot fill fall
        # through to the next higher tier, down to floor 0 (everything).
        return {
            "limit": free,
            "kinds": self.kinds,
            "queues": self.queues or None,
            "exclude_kinds": at_cap,
            "kind_limits": limits or None,
            "preferring": {f: n for f, n in floors.items() if f},
            "leases": self.leases,
        }

    def _policy(self, kind: str) -> Policy:
        """A kind's policy, resolved once per worker (settings are read at start)."""
        policy = self._policies.get(kind)
        if policy is None:
            policy = self._policies[kind] = policy_for(kind)
        return policy

    def _dispatch(self, job: Claimed) -> None:
        lease = self._policy(job.kind).lease
        ctx = Context.for_job(job, history_loader=partial(store.journal, job_id=job.id))
        running = Running(job=job, ctx=ctx, lease=lease, expires_at=job.claim_expires_at)
        self._running[job.id] = running
        self.claimed += 1
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("claimed job=%s kind=%s run=%d", job.id, job.kind, job.run_count)
        self._inbox.put(running)

    def _execute_loop(self) -> None:
        try:
            while True:
                running = self._inbox.get()
                if running is None:
                    return
                defn = registry.find(running.job.kind)
                try:
                    result = execute(defn, running.job, running.ctx)
                except BaseException:  # the executor catches task errors; this is ours
                    logger.exception("executor failed on job %s", running.job.id)
                    raise
                self._outbox.put(result)
                self._wake.set()
                _close_broken_connections()
        finally:
            connections.close_all()

    # --- settling ---------------------------------------------------------------------------

    def _collect(self) -> None:
        """Turn finished runs into settlements (pure), ready to write in one batch."""
        while True:
            try:
                result = self._outbox.get(block=False)
            except queue_module.Empty:
                return
            running = self._running.get(result.job.id)
            if running is None or running.job.run_count != result.job.run_count:
                continue  # released at shutdown; its result is dropped
            self._unsettled.append(
                decide(result, policy=self._policy(result.job.kind), worker_id=self.worker_id)
            )

    def _flush(self) -> None:
        """Settle what ended, claiming nothing (at shutdown and at the end of a burst)."""
        if self._unsettled:
            self._turn(claim=False)

    def _settled(self, batch: list[Settlement], applied: list[bool]) -> None:
        self._unsettled = self._unsettled[len(batch) :]
        for s in batch:
            self._running.pop(s.job_id, None)
        self.processed += len(batch)
        if logger.isEnabledFor(logging.INFO):
            # One line per settlement, but one log record per turn: a record per job
            # cost a quarter of a busy worker's time.
            lines = [
                f"settled job={s.job_id} kind={s.kind} outcome={s.outcome} "
                f"duration={s.duration.total_seconds() if s.duration else 0.0:.3f}s"
                for s, ok in zip(batch, applied, strict=True)
                if ok
            ]
            if lines:
                logger.info("\n".join(lines))

    # --- maintenance ------------------------------------------------------------------------

    def _due(self, name: str, every: float) -> bool:
        now = time.monotonic()
        # Never done is always due: monotonic time has no fixed origin (it may be smaller
        # than ``every`` on a freshly booted host), so 0 is not "long ago".
        last = self._last.get(name)
        if last is None or now - last >= every:
            self._last[name] = now
            return True
        return False

    def _maintain(self) -> None:
        if self._due("recover", RECOVER_EVERY):
            self._db(partial(store.recover_expired, policy_for=self._policy))
        if self._running:
            self._extend_leases()
            if self._due("cancel", CANCEL_CHECK_EVERY):
                wanted = self._db(lambda: store.cancel_requested(job_ids=list(self._running)))
                for job_id in wanted or ():
                    running = self._running.get(job_id)
                    if running is not None and not running.ctx.cancelled.is_set():
                        logger.info("cancel requested for job=%s", job_id)
                        running.ctx.cancelled.set()
        if self._due("heartbeat", HEARTBEAT_EVERY):
            self._db(lambda: store.beat(worker_id=self.heartbeat_id, jobs_done=self.processed))
        if self.retention and self._due("retention", self.retention_interval):
            for status, keep in self.retention.items():
                self._db(
                    partial(store.cleanup, finished_before=timezone.now() - keep, status=status)
                )

    def _extend_leases(self) -> None:
        now = timezone.now()
        due = [r for r in self._running.values() if r.expires_at - now < r.lease / 2]
        by_lease: dict[timedelta, list[Running]] = {}
        for r in due:
            by_lease.setdefault(r.lease, []).append(r)
        for lease, group in by_lease.items():
            until = now + lease
            done = self._db(
                partial(
                    store.extend_leases,
                    worker_id=self.worker_id,
                    runs={r.job.id: r.job.run_count for r in group},
                    until=until,
                )
            )
            if done is not None:
                for r in group:
                    r.expires_at = until

    # --- shutdown ---------------------------------------------------------------------------

    def _shutdown(self) -> None:
        for running in self._running.values():
            running.ctx.cancelled.set()
        deadline = time.monotonic() + self.shutdown_timeout
        while self._running and time.monotonic() < deadline:
            self._collect()
            self._flush()
            if not self._running:
                break
            self._wake.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            self._wake.clear()
        self._collect()
        # Whatever still runs is handed back: pending now, no failure counted.
        finished = {s.job_id for s in self._unsettled}
        for running in list(self._running.values()):
            if running.job.id not in finished:
                job = running.job
                self._unsettled.append(
                    released(
                        job_id=job.id,
                        kind=job.kind,
                        run_no=job.run_count,
                        now=timezone.now(),
                        worker=self.worker_id,
                        note="worker shut down",
                    )
                )
        for attempt in range(5):
            self._flush()
            if not self._unsettled:
                break
            time.sleep(min(0.2 * 2**attempt, 2))
        self._running.clear()

    # --- database errors --------------------------------------------------------------------

    def _db_backoff(self) -> float:
        return float(min(0.1 * 2 ** max(self._db_failures - 1, 0), 5.0))

    def _db(self, call: Callable[[], T]) -> T | None:
        """Run a store call; on a connection error close, back off and return None."""
        try:
            result = call()
        except (OperationalError, InterfaceError, DatabaseError) as exc:
            if not _is_connection_error(exc):
                raise
            self._db_failures += 1
            wait = self._db_backoff()
            logger.warning(
                "database error (%s); reconnecting in %.1fs", str(exc).strip()[:200], wait
            )
            with contextlib.suppress(Exception):  # the connection is already broken
                connections[self.alias].close()
            self._last["retry"] = time.monotonic() + wait
            self._stopping.wait(wait)
            return None
        if self._db_failures:
            logger.info("database connection restored")
            self._db_failures = 0
        return result


def _close_broken_connections() -> None:
    """Close this thread's connections that a run left unusable (dropped by the server, say),
    so the next job on the thread reconnects instead of failing on a dead connection.
    Healthy ones stay open whatever CONN_MAX_AGE says."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and conn.errors_occurred:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    # "database is locked" on SQLite and serialisation failures are transient too.
    text = str(exc).lower()
    return "locked" in text or "could not serialize" in text or "deadlock" in text
