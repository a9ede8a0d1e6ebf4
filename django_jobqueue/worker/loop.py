"""The worker loop: claim → dispatch → settle, with wake-ups, leases and graceful shutdown.

One loop thread talks to the database through ``store``; jobs run on a fixed set of
daemon threads. The loop never dies of a lost database connection: it closes the
connection, backs off, and carries on, keeping unsettled results to write later.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from types import FrameType
from typing import Any

from django.db import DatabaseError, connections
from django.utils import timezone

from django_jobqueue import conf, signals, store, validation
from django_jobqueue.run import transactional
from django_jobqueue.run.context import Context
from django_jobqueue.run.executor import RunResult, decide
from django_jobqueue.run.lifecycle import (
    Policy,
    Run,
    Settlement,
    released,
    settlement_refused,
    timed_out,
)
from django_jobqueue.store import Claimed
from django_jobqueue.store.wakeups import Listener
from django_jobqueue.task.periodic import schedules
from django_jobqueue.task.registry import policy_for, registry
from django_jobqueue.worker.dbguard import DbGuard, is_connection_error
from django_jobqueue.worker.services.base import MIN_WAIT, Maintenance, Running, Service, Timings
from django_jobqueue.worker.services.cancels import CancelChecks
from django_jobqueue.worker.services.heartbeat import Heartbeat
from django_jobqueue.worker.services.leases import LeaseExtension
from django_jobqueue.worker.services.limits import LimitRefresh
from django_jobqueue.worker.services.recovery import Recovery
from django_jobqueue.worker.services.retention import Retention
from django_jobqueue.worker.services.scheduler import Scheduler
from django_jobqueue.worker.services.timeouts import Timeouts
from django_jobqueue.worker.slots import Slots

logger = logging.getLogger("django_jobqueue")


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
        timings: Timings | None = None,
    ) -> None:
        settings = conf.get()
        self.alias = settings.database
        self.queues = list(queues or [])
        self.kinds = _known_kinds(kinds)
        self.concurrency = (
            settings.concurrency
            if concurrency is None
            else validation.positive_int(concurrency, name="concurrency", error=ValueError)
        )
        self.caps = {**settings.kind_concurrency, **(caps or {})}
        # Each limited kind's max_in_flight, kept current by the LimitRefresh service.
        self.max_in_flight: dict[str, int] = {}
        self.leases = registry.leases()
        self._policies: dict[str, Policy] = {}
        self.burst = burst
        self.max_jobs = max_jobs
        self.shutdown_timeout = _seconds(
            "shutdown_timeout", settings.shutdown_timeout, shutdown_timeout, allow_zero=True
        )
        self.poll_interval = _seconds(
            "poll_interval", settings.poll_interval, poll_interval, allow_zero=False
        )
        self.priority_ratio = settings.priority_ratio
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker_id = worker_id or f"{self.host}:{self.pid}"
        self.heartbeat_id = f"{self.worker_id}:{uuid.uuid4().hex[:8]}"

        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._slots = Slots(
            run=partial(
                transactional.run,
                alias=self.alias,
                worker_id=self.worker_id,
                max_output_bytes=settings.max_output_bytes,
            ),
            on_result=self._wake.set,
        )
        self._atomic_kinds = {d.kind for d in registry if d.atomic}
        self._atomic_warn_after = settings.atomic_warn_after
        self._running: dict[uuid.UUID, Running] = {}
        self._unsettled: list[Settlement] = []
        self._listener = Listener(settings.listen_database, self._on_notify)
        self._slot = 0
        self._db = DbGuard(self.alias, self._stopping)
        self.processed = 0
        self.claimed = 0
        self._signals = 0
        self._maintenance = self._services(timings or Timings.from_settings(settings), settings)

    def _services(self, timings: Timings, settings: conf.Settings) -> Maintenance:
        self._recovery = Recovery(
            self._db, interval=timings.recover, policy_for=self._policy, running=self._running
        )
        self._limits = LimitRefresh(
            self._db, every=timings.limits, kinds=self.kinds, on_change=self._limits_changed
        )
        services: list[Service] = [
            self._limits,
            self._recovery,
            LeaseExtension(
                self._db,
                interval=timings.lease_check,
                worker_id=self.worker_id,
                running=self._running,
            ),
            CancelChecks(self._db, interval=timings.cancel_check, running=self._running),
            Timeouts(
                interval=timings.timeout_check,
                running=self._running,
                on_timeout=self._timed_out,
                atomic_warn_after=settings.atomic_warn_after,
            ),
            Heartbeat(
                self._db,
                interval=timings.heartbeat,
                worker_id=self.heartbeat_id,
                jobs_done=lambda: self.processed,
            ),
        ]
        if settings.retention:
            services.append(
                Retention(self._db, interval=timings.retention, keep=settings.retention)
            )
        periodic = schedules()
        if periodic:  # none: no scheduler, so no cost
            services.append(Scheduler(self._db, interval=timings.schedules, schedules=periodic))
        return Maintenance(services)

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
        if payload == store.LIMITS_CHANGED:
            self._limits.stale = True
            self._wake.set()
        elif not payload or not self.queues or payload in self.queues:
            self._wake.set()

    def _limits_changed(self, found: dict[str, int]) -> None:
        if found != self.max_in_flight:
            logger.info("max_in_flight now %s", found or "unlimited for every kind")
        self.max_in_flight = found

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
        unknown = sorted(set(conf.get().limits) - set(registry.kinds()))
        if unknown:
            logger.warning(
                "JOBQUEUE['LIMITS'] names kind(s) no task is registered under, ignored: %s",
                ", ".join(unknown),
            )
        self._register()
        self._listener.start()
        self._slots.start(self.concurrency)
        try:
            self._loop()
            self._shutdown()
        finally:
            self._listener.stop()
            self._slots.stop()
            self._db(
                lambda: store.beat(
                    worker_id=self.heartbeat_id, jobs_done=self.processed, stopped=True
                )
            )
            connections[self.alias].close()
        logger.info("worker %s stopped after %d jobs", self.worker_id, self.processed)
        return self.processed

    def _register(self) -> None:
        """List this worker (its heartbeat row) before it claims anything, retrying through
        connection errors: operators and the health check see every worker that runs."""
        while not self._stopping.is_set():
            if self._db(self._register_once):
                return

    def _register_once(self) -> bool:
        store.register_worker(
            worker_id=self.heartbeat_id,
            host=self.host,
            pid=self.pid,
            queues=self.queues,
            kinds=self.kinds,
            concurrency=self.concurrency,
        )
        return True

    def _loop(self) -> None:
        while not self._stopping.is_set():
            # Cleared before looking, so a wake-up that arrives while we work is kept
            # for the next wait instead of being lost.
            self._wake.clear()
            self._collect()
            self._maintenance.run_due()
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
        if not self._running and not self._limit_reached():
            # Idle: sleep until the next scheduled job, the next lease to recover, the
            # poll ceiling or a NOTIFY, whichever comes first.
            nxt, expiry = self._db(
                lambda: store.next_wakeup(kinds=self.kinds, queues=self.queues or None)
            ) or (None, None)
            self._recovery.next_expiry = expiry
            if nxt is not None:
                timeout = min(timeout, max((nxt - timezone.now()).total_seconds(), 0.0))
        timeout = min(timeout, self._maintenance.wake_in())
        if self._unsettled:
            timeout = min(timeout, max(self._db.backoff(), MIN_WAIT))
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
        batch = [] if self._db.waiting else list(self._unsettled)
        settling = {s.job_id for s in batch}
        free = self.concurrency - sum(1 for job_id in self._running if job_id not in settling)
        wanted = self._claim_options(free) if claim else None
        if not batch and wanted is None:
            return 0, 0, free
        try:
            result = self._db(
                partial(
                    store.exchange,
                    worker_id=self.worker_id,
                    settlements=batch,
                    **(wanted or {"limit": 0}),
                )
            )
        except DatabaseError as exc:
            if not batch:
                raise
            self._settle_apart(batch, exc)
            return len(batch), 0, free
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
        if free <= 0 or not self._limits.ready:
            return None
        in_flight = Counter(r.job.kind for r in self._running.values())
        at_cap = {k for k, cap in self.caps.items() if in_flight[k] >= cap}
        limits = {k: cap - in_flight[k] for k, cap in self.caps.items() if k not in at_cap}
        # A kind at its global limit by this worker's runs alone needs no look; the others
        # are counted (all workers) inside the claim.
        at_cap |= {k for k, most in self.max_in_flight.items() if in_flight[k] >= most}
        limited = {k: most for k, most in self.max_in_flight.items() if k not in at_cap}
        floors = Counter(priority_floor(self._slot + i, self.priority_ratio) for i in range(free))
        # A floor only says which tier a slot prefers: slots its tiers cannot fill fall
        # through to the next higher tier, down to floor 0 (everything).
        return {
            "limit": free,
            "kinds": self.kinds,
            "queues": self.queues or None,
            "exclude_kinds": at_cap,
            "kind_limits": limits or None,
            "max_in_flight": limited or None,
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
        policy = self._policy(job.kind)
        ctx = Context.for_job(job, history_loader=partial(store.journal, job_id=job.id))
        running = Running(
            job=job,
            ctx=ctx,
            lease=policy.lease,
            expires_at=job.claim_expires_at,
            deadline=(
                time.monotonic() + policy.timeout.total_seconds() if policy.timeout else None
            ),
            warn_at=(
                time.monotonic() + self._atomic_warn_after.total_seconds()
                if self._atomic_warn_after is not None and job.kind in self._atomic_kinds
                else None
            ),
        )
        self._running[job.id] = running
        self.claimed += 1
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("claimed job=%s kind=%s run=%d", job.id, job.kind, job.run_count)
        self._slots.submit(running)

    def _timed_out(self, running: Running) -> None:
        """Give up on a run past its timeout: settle it as a failed run now; its thread is
        abandoned (and replaced), whatever it returns dropped."""
        job = running.job
        policy = self._policy(job.kind)
        del self._running[job.id]
        running.ctx.cancelled.set()
        self._slots.abandon(running)
        logger.warning(
            "job=%s kind=%s run=%d timed out after %s: thread abandoned",
            job.id,
            job.kind,
            job.run_count,
            policy.timeout,
        )
        self._unsettled.append(
            timed_out(
                Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker=self.worker_id),
                failure_count=job.failure_count,
                policy=policy,
                now=timezone.now(),
            )
        )

    # --- settling ---------------------------------------------------------------------------

    def _collect(self) -> None:
        """Turn finished runs into settlements (pure), ready to write in one batch."""
        for result in self._slots.results():
            running = self._running.get(result.job.id)
            if running is None or running.job.run_count != result.job.run_count:
                continue  # released at shutdown or timed out; its result is dropped
            running.ended = True
            if result.settled or result.lost:
                self._done_in_transaction(result)
                continue
            self._unsettled.append(
                decide(result, policy=self._policy(result.job.kind), worker_id=self.worker_id)
            )

    def _done_in_transaction(self, result: RunResult) -> None:
        """A run that settled itself in its own transaction (atomic, settle_now), or whose
        claim it found lost there: nothing is left to write."""
        job = result.job
        del self._running[job.id]
        if result.lost:
            logger.info(
                "dropped run job=%s kind=%s run=%d: its claim was lost, its transaction "
                "rolled back",
                job.id,
                job.kind,
                job.run_count,
            )
            return
        self.processed += 1
        if signals.job_finished.receivers:
            signals.finished_in_transaction(
                result.job, result.value, result.duration, worker=self.worker_id
            )
        if logger.isEnabledFor(logging.INFO):
            logger.info(
                "settled job=%s kind=%s outcome=completed duration=%.3fs (in its own transaction)",
                job.id,
                job.kind,
                result.duration.total_seconds(),
            )

    def _flush(self) -> None:
        """Settle what ended, claiming nothing (at shutdown and at the end of a burst)."""
        if self._unsettled:
            self._turn(claim=False)

    def _settle_apart(self, batch: list[Settlement], exc: DatabaseError) -> None:
        """The database refused a batch: settle each run alone, and one it refuses again
        as a failed run saying why. No settlement can take the worker down."""
        logger.error("the database refused a batch of settlements (%s); settling each alone", exc)
        for s in batch:
            applied = self._db(partial(self._settle_alone, s))
            if applied is None:
                return  # connection lost: the rest stays unsettled, for the next turn
            self._settled([s], [applied])

    def _settle_alone(self, s: Settlement) -> bool:
        try:
            return store.settle(worker_id=self.worker_id, settlements=[s])[0]
        except DatabaseError as exc:
            if is_connection_error(exc):
                raise
            running = self._running.get(s.job_id)
            refused = settlement_refused(
                s,
                failure_count=running.job.failure_count if running else 0,
                policy=self._policy(s.kind),
                now=timezone.now(),
                error=str(exc),
            )
        try:
            return store.settle(worker_id=self.worker_id, settlements=[refused])[0]
        except DatabaseError as exc:
            if is_connection_error(exc):
                raise
            logger.exception("job=%s: even its failure could not be settled", s.job_id)
            return False  # still claimed: recovered when its lease runs out

    def _settled(self, batch: list[Settlement], applied: list[bool]) -> None:
        self._unsettled = self._unsettled[len(batch) :]
        for s in batch:
            self._running.pop(s.job_id, None)
        self.processed += len(batch)
        if signals.job_finished.receivers:
            signals.finished(batch, applied)
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
                        Run(
                            job_id=job.id,
                            kind=job.kind,
                            run_no=job.run_count,
                            worker=self.worker_id,
                        ),
                        now=timezone.now(),
                        note="worker shut down",
                    )
                )
        for attempt in range(5):
            self._flush()
            if not self._unsettled:
                break
            time.sleep(min(0.2 * 2**attempt, 2))
        self._running.clear()


def _known_kinds(kinds: Sequence[str] | None) -> list[str]:
    """The kinds a worker runs: those given, each of which must be registered, or all."""
    unknown = sorted(set(kinds or []) - set(registry.kinds()))
    if unknown:
        raise ValueError(
            f"Unknown kind(s) {', '.join(unknown)}; known: {', '.join(registry.kinds())}"
        )
    return list(kinds) if kinds else registry.kinds()


def _seconds(name: str, default: timedelta, given: float | None, *, allow_zero: bool) -> float:
    """A worker option in seconds (the setting's value unless given), checked."""
    value = default if given is None else given
    return validation.duration(
        value, name=name, error=ValueError, allow_zero=allow_zero
    ).total_seconds()
