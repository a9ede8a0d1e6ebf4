"""The worker loop: claim → dispatch → settle, with wake-ups, leases and graceful shutdown.

One loop thread talks to the database through ``store``; jobs run on a fixed set of
daemon threads, each through the run pipeline (``run.pipeline``, the one
``testing.run_jobs`` uses too). The loop never dies of a lost database connection: it
closes the connection, backs off, and carries on, keeping unsettled results to write
later. Its turn (settle and claim in one round trip) is ``turn``; its pure parts sit
beside it: what to claim (``claiming``), the settlements off the beaten path
(``settling``), its options and services (``startup``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from functools import partial
from types import FrameType

from django.db import DatabaseError, connections

from django_jobqueue import clock, conf, routing, sentry, store
from django_jobqueue.formatting import plural
from django_jobqueue.rules.lifecycle import Settlement, terminated, timed_out
from django_jobqueue.run.executor import run_of
from django_jobqueue.run.logs import captured
from django_jobqueue.run.pipeline import Pipeline
from django_jobqueue.store import Claimed
from django_jobqueue.task.registry import registry
from django_jobqueue.worker import settling, startup
from django_jobqueue.worker.claiming import KeyCursor
from django_jobqueue.worker.dbguard import DbGuard
from django_jobqueue.worker.handlers import SignalWork
from django_jobqueue.worker.listener import listener_for
from django_jobqueue.worker.pools import Pools
from django_jobqueue.worker.services.base import MIN_WAIT, Maintenance, Running, Timings
from django_jobqueue.worker.services.limits import LimitRefresh
from django_jobqueue.worker.services.recovery import Recovery
from django_jobqueue.worker.sizing import HOLD
from django_jobqueue.worker.turn import Turns
from django_jobqueue.worker.wake import Wake

logger = logging.getLogger("django_jobqueue")


class Worker(Turns):
    """Runs jobs until stopped (or, with ``burst``, until nothing is claimable)."""

    # Whether the last turn's claim took less than it had room for (the queue has
    # caught up); None until a first turn.
    _caught_up: bool | None = None

    def __init__(
        self,
        *,
        queues: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        concurrency: int | None = None,
        async_concurrency: int | None = None,
        caps: dict[str, int] | None = None,
        burst: bool = False,
        max_jobs: int | None = None,
        shutdown_timeout: float | None = None,
        poll_interval: float | None = None,
        worker_id: str | None = None,
        timings: Timings | None = None,
        pool: str | None = None,
        max_tasks_per_child: int | None = None,
        max_memory_per_child: int | None = None,
    ) -> None:
        settings = conf.get()
        self.pool = startup.pool(pool, settings)
        self.alias = routing.current()
        self.queues = list(queues or [])
        self.kinds = startup.known_kinds(kinds)
        self.concurrency = startup.concurrency(concurrency, settings)
        self.async_concurrency = startup.concurrency(
            async_concurrency, settings, name="async_concurrency"
        )
        self.caps = {**settings.kind_concurrency, **(caps or {})}
        self.max_in_flight: dict[str, int] = {}  # kept current by LimitRefresh, as are
        self.key_rules: dict[str, store.KeyRule] = {}  # the kinds' per-key rules
        self._keys = KeyCursor()  # where each keyed kind's next claim starts
        self.leases = registry.leases()
        self.burst = burst
        self.max_jobs = max_jobs
        self.shutdown_timeout = startup.seconds(
            "shutdown_timeout", settings.shutdown_timeout, shutdown_timeout, allow_zero=True
        )
        self.poll_interval = startup.seconds(
            "poll_interval", settings.poll_interval, poll_interval, allow_zero=False
        )
        self.priority_ratio = settings.priority_ratio
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker_id = worker_id or f"{self.host}:{self.pid}"
        self.heartbeat_id = f"{self.worker_id}:{uuid.uuid4().hex[:8]}"

        self._wake = Wake()
        self._stopping = threading.Event()
        self._pipe = Pipeline(self.worker_id, self.alias, settings.max_output_bytes)
        self._pools = self._make_pools(max_tasks_per_child, max_memory_per_child)
        self._atomic_kinds = {d.kind for d in registry if d.atomic}
        self._atomic_warn_after = settings.atomic_warn_after
        self._running: dict[uuid.UUID, Running] = {}
        self._unsettled: list[Settlement] = []
        self._slot = 0
        self._db = DbGuard(self.alias, self._stopping)
        self._listener = listener_for(self.alias, self._on_notify, wake=self._wake, db=self._db)
        self.processed = self.claimed = 0
        self._signals = 0
        self._maintenance = self._services(timings or Timings.from_settings(settings), settings)

    def _make_pools(
        self, max_tasks_per_child: int | None, max_memory_per_child: int | None
    ) -> Pools:
        return Pools(
            pipe=self._pipe,
            on_result=self._wake.set,
            concurrency=self.concurrency,
            async_concurrency=self.async_concurrency,
            kinds=self.kinds,
            async_kinds={d.kind for d in registry if d.asynchronous},
            process=self.pool == "process",
            max_tasks_per_child=max_tasks_per_child,
            max_memory_per_child=max_memory_per_child,
        )

    def _services(self, timings: Timings, settings: conf.Settings) -> Maintenance:
        self._recovery = Recovery(
            self._db, interval=timings.recover, policy_for=self._pipe.policy, running=self._running
        )
        self._limits = LimitRefresh(
            self._db, every=timings.limits, kinds=self.kinds, on_change=self._limits_changed
        )
        return startup.services(
            self._db,
            timings=timings,
            settings=settings,
            running=self._running,
            recovery=self._recovery,
            limits=self._limits,
            worker_id=self.worker_id,
            heartbeat_id=self.heartbeat_id,
            on_timeout=self._timed_out,
            on_terminate=self._terminated,
            jobs_done=lambda: self.processed,
            caught_up=lambda: self._caught_up,
        )

    # --- public control -------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to shut down gracefully (what SIGTERM does)."""
        self._stopping.set()
        self._wake.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: graceful stop; a second one exits at once."""
        self._signal_work = SignalWork("jobqueue-signal")
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal: exiting now; running jobs recover when leases expire")
            os._exit(1)
        logger.info("signal %s: stopping (send again to exit at once)", signum)
        self._signal_work.soon(self.stop)  # not here: see worker.handlers

    def _on_notify(self, payload: str) -> None:
        if payload == store.LIMITS_CHANGED:
            self._limits.stale = True
            self._wake.set()
        elif not payload or not self.queues or payload in self.queues:
            self._wake.set()

    def _limits_changed(self, limits: tuple[dict[str, int], dict[str, store.KeyRule]]) -> None:
        found, self.key_rules = limits
        if found != self.max_in_flight:
            logger.info("max_in_flight now %s", found or "unlimited for every kind")
        self.max_in_flight = found

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped; returns how many jobs this worker settled."""
        logger.info(
            "worker %s starting: concurrency=%d pool=%s queues=%s kinds=%d caps=%s",
            self.worker_id,
            self.concurrency,
            self.pool,
            self.queues or "all",
            len(self.kinds),
            self.caps,
        )
        startup.warn_at_start(self.kinds, self.queues)
        if ignored := startup.soft_limits_ignored(self.kinds, self.pool):
            logger.warning(
                "soft_time_limit of %s: only the process pool (--pool process) interrupts "
                "a run there; this worker runs them on threads, where only the hard limit "
                "applies",
                ", ".join(ignored),
            )
        self._register()
        self._listener.start()
        self._pools.start()
        try:
            self._loop()
            self._shutdown()
        finally:
            self._listener.stop()
            self._pools.stop()
            self._db(
                lambda: store.beat(
                    worker_id=self.heartbeat_id, jobs_done=self.processed, stopped=True
                )
            )
            connections[self.alias].close()
        logger.info(
            "worker %s stopped after %s", self.worker_id, plural(self.processed, "job", "jobs")
        )
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
            stood = self._send_ready()  # an idle worker's claim, first (``turn``)
            self._collect()
            self._hand_back(self._pools.withdraw(waited=HOLD), "waited too long for a slot")
            self._maintenance.run_due()
            if self._limit_reached() and not self._running:
                return
            if stood:  # it claimed all there was: a turn now would claim nothing more
                self._wait()
                continue
            self._gather()
            unseen, got, free = self._turn()
            self._caught_up = got < free
            if got < free and unseen:
                continue  # the settlements may have made claimable what the claim missed
            if self.burst and not self._running and got == 0:
                self._flush()
                return
            if got and got == free:
                continue  # every slot taken: look again as soon as one frees up
            self._wait()

    def _gather(self) -> None:
        """Before a turn that settles short runs, let those its slot threads are about to
        finish end first (``Sizing.gather``): a turn costs a round trip whatever it
        settles, and one sent while a few of the last batch still run leaves them a
        turn of their own, after which the two halves keep alternating."""
        if not self._unsettled or self._stopping.is_set():
            return
        going = self._pools.going(self._running)
        deadline = time.monotonic() + self._pools.sizing.gather(going, self.concurrency)
        while going and (left := deadline - time.monotonic()) > 0:
            self._wake.wait(left)
            self._wake.clear()
            self._collect()
            going = self._pools.going(self._running)

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
                timeout = min(timeout, max((nxt - clock.now()).total_seconds(), 0.0))
        timeout = min(timeout, self._maintenance.wake_in())
        if self._unsettled:
            timeout = min(timeout, max(self._db.backoff(), MIN_WAIT))
        if timeout > 0:
            self._make_ready()  # idle: the next claim, ready before the wait
            self._listener.wait(timeout)

    def _limit_reached(self) -> bool:
        return self.max_jobs is not None and self.claimed >= self.max_jobs

    def _dispatch(self, job: Claimed) -> None:
        policy = self._pipe.policy(job.kind)
        limit = policy.hard_limit()
        if limit is not None and self._pools.limited_from_start(job.kind):
            limit = None
        running = Running(
            job=job,
            ctx=self._pipe.context(job),
            lease=policy.lease,
            expires_at=job.claim_expires_at,
            deadline=time.monotonic() + limit[0].total_seconds() if limit else None,
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
        self._pools.submit(running)

    def _timed_out(self, running: Running) -> None:
        """Give up on a run past its hard limit: settle it as a failed run now, stopped by
        its pool's strongest means (its child killed, its coroutine cancelled, its thread
        abandoned and replaced), whatever it returns dropped."""
        job = running.job
        policy = self._pipe.policy(job.kind)
        del self._running[job.id]
        lines = captured(running.ctx._run_logs)  # what it logged before it was given up on
        running.ctx._given_up = True  # reported below, not by the run
        running.ctx.cancelled.set()
        means = self._pools.abandon(running)
        logger.warning(
            "job=%s kind=%s run=%d timed out after %s: %s",
            job.id,
            job.kind,
            job.run_count,
            (policy.hard_limit() or (policy.timeout, ""))[0],
            means,
        )
        settlement = timed_out(
            run_of(job, worker=self.worker_id, logs=lines),
            failure_count=job.failure_count,
            policy=policy,
            now=clock.now(),
            means=means,
        )
        self._unsettled.append(settlement)
        sentry.timed_out(
            job, worker_id=self.worker_id, outcome=settlement.outcome, note=settlement.note
        )

    def _terminated(self, running: Running, actor: str) -> None:
        """Stop a run an operator terminated, by its pool's strongest means, and settle
        it cancelled now, the journal naming the operator and the means."""
        job = running.job
        del self._running[job.id]
        running.ctx._given_up = True  # cancelled, not failed: nothing for Sentry
        running.ctx.cancelled.set()
        means = self._pools.abandon(running)
        logger.warning(
            "job=%s kind=%s run=%d terminated by %s: %s",
            job.id,
            job.kind,
            job.run_count,
            actor or "an operator",
            means,
        )
        now = clock.now()
        began = running.started_at
        took = None if began is None else now - began
        run = run_of(job, worker=self.worker_id, started_at=began, duration=took)
        self._unsettled.append(terminated(run, actor=actor, means=means))

    # --- settling ---------------------------------------------------------------------------

    def _collect(self) -> None:
        """Take in the runs that ended: their settlements, decided on the slot threads,
        wait to be written in one batch."""
        for ended in self._pools.results():
            job = ended.result.job
            running = self._running.get(job.id)
            if running is None or running.job.run_count != job.run_count:
                continue  # released at shutdown or timed out; its result is dropped
            running.ended = True
            self._pools.ran(job.kind, ended.result.duration.total_seconds())
            settlement = self._pipe.to_write(ended)
            if settlement is not None:
                self._unsettled.append(settlement)
                continue
            # It settled itself in its own transaction, or found its claim lost there.
            del self._running[job.id]
            if ended.result.settled:
                self.processed += 1

    def _flush(self) -> None:
        """Settle what ended, claiming nothing (at shutdown and at the end of a burst)."""
        if self._unsettled:
            self._turn(claim=False)

    def _settle_apart(self, batch: list[Settlement], exc: DatabaseError) -> None:
        """The database refused a batch: settle each run alone, and one it refuses again
        as a failed run saying why. No settlement can take the worker down."""
        logger.error("the database refused a batch of settlements (%s); settling each alone", exc)
        for s in batch:
            running = self._running.get(s.job_id)
            alone = partial(
                settling.settle_alone,
                s,
                worker_id=self.worker_id,
                failure_count=running.job.failure_count if running else 0,
                policy=self._pipe.policy(s.kind),
                now=clock.now(),
            )
            applied = self._db(alone)
            if applied is None:
                return  # connection lost: the rest stays unsettled, for the next turn
            self._settled([s], [applied])

    def _settled(self, batch: list[Settlement], applied: Sequence[bool]) -> None:
        """Forget the settlements written (or dropped: a claim no longer ours)."""
        self._unsettled = self._unsettled[len(batch) :]
        for s in batch:
            self._running.pop(s.job_id, None)
        self.processed += len(batch)
        self._pipe.settled(batch, applied)

    # --- shutdown ---------------------------------------------------------------------------

    def _hand_back(self, waiting: list[Running], note: str) -> None:
        """Release buffered jobs no slot thread started: pending now, no failure counted."""
        for running in waiting:
            running.ended = True  # no timeout or warning applies to a run never started
        if waiting:
            self._unsettled += settling.handed_back(
                waiting, worker_id=self.worker_id, now=clock.now(), note=note
            )

    def _shutdown(self) -> None:
        self._hand_back(self._pools.withdraw(), "worker shut down before it started")
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
        self._unsettled += settling.handed_back(
            [r for r in self._running.values() if r.job.id not in finished],
            worker_id=self.worker_id,
            now=clock.now(),
        )
        for attempt in range(5):
            self._flush()
            if not self._unsettled:
                break
            time.sleep(min(0.2 * 2**attempt, 2))
        self._running.clear()
