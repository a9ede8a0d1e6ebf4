"""The worker's maintenance services: stale-lease recovery, lease extension, operator
cancel checks, heartbeats, retention and re-reading the run-time limits (and the periodic
scheduler, in ``scheduler.py``).

Each is a small object of one shape (a ``name``, an ``interval`` in seconds and a
``run()``), driven by one ``Maintenance`` loop inside the worker; ``wake_in`` tells
the worker how soon a service needs it awake again. Every interval is in ``Timings``,
in one place. Database calls go through the worker's guarded call (``db``), so a lost
connection costs a service one turn, never the worker.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from django.utils import timezone

from . import limiting, store

if TYPE_CHECKING:
    from .conf import Settings
    from .context import Context
    from .lifecycle import Policy
    from .store import Claimed

logger = logging.getLogger("django_jobqueue")

T = TypeVar("T")
# The worker's guarded database call: the call's result, or None after a connection error.
DbCall = Callable[[Callable[[], Any]], Any]

MIN_WAIT = 0.05  # seconds: the shortest sleep a service may ask for (no busy loop)


@dataclass(frozen=True)
class Timings:
    """How often each service runs, in seconds."""

    recover: float = 1.0  # sweep for expired leases (a dead worker's jobs)
    cancel_check: float = 1.0  # look for operator cancels of the jobs this worker runs
    heartbeat: float = 10.0  # keep this worker listed as alive
    lease_check: float = 0.0  # every turn: a lease is extended once a third of it is used
    timeout_check: float = 0.0  # every turn: a run past its task's timeout is given up
    retention: float = 300.0  # delete finished jobs past RETENTION (RETENTION_INTERVAL)
    limits: float = limiting.REFRESH  # re-read the run-time limits (at once when told)
    schedules: float = 1.0  # at most this often, look for a periodic schedule's due tick

    @classmethod
    def from_settings(cls, settings: Settings) -> Timings:
        return cls(retention=settings.retention_interval.total_seconds())


@dataclass
class Running:
    """A run in flight, as the worker and its services see it."""

    job: Claimed
    ctx: Context
    lease: timedelta
    expires_at: datetime
    deadline: float | None = None  # monotonic time its timeout runs out (None: no timeout)
    ended: bool = False  # its result is in: no longer subject to the timeout
    # An atomic run: monotonic time after which its open transaction is logged as long.
    warn_at: float | None = None


class Service:
    """One maintenance duty: run every ``interval`` seconds by ``Maintenance``."""

    name: str = ""
    interval: float = 0.0

    def run(self) -> None:
        raise NotImplementedError

    def wake_in(self, since_run: float) -> float | None:
        """Seconds until the worker must wake for this service (None: it need not)."""
        return self.interval - since_run


class Maintenance:
    """Runs each service when its interval has passed; says when the next one is due."""

    def __init__(self, services: list[Service]) -> None:
        self.services = services
        self._last: dict[str, float] = {}

    def run_due(self) -> None:
        now = time.monotonic()
        for service in self.services:
            # Never run is always due: monotonic time has no fixed origin (it may be
            # smaller than the interval on a freshly booted host), so 0 is not "long ago".
            last = self._last.get(service.name)
            if last is None or now - last >= service.interval:
                self._last[service.name] = now
                service.run()

    def wake_in(self) -> float:
        """Seconds until a service next needs the worker awake (at least ``MIN_WAIT``)."""
        now = time.monotonic()
        waits = [
            wait
            for service in self.services
            if (wait := service.wake_in(now - self._last.get(service.name, now))) is not None
        ]
        return max(min(waits, default=float("inf")), MIN_WAIT)


class Recovery(Service):
    """Send jobs whose lease ran out (their worker died) back to pending."""

    name = "recover"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        policy_for: Callable[[str], Policy],
        running: Mapping[uuid.UUID, Running],
    ) -> None:
        self.db = db
        self.interval = interval
        self.policy_for = policy_for
        self.running = running
        # The earliest lease end an idle worker saw; set by the worker while it idles.
        self.next_expiry: datetime | None = None

    def run(self) -> None:
        self.db(partial(store.recover_expired, policy_for=self.policy_for))

    def wake_in(self, since_run: float) -> float | None:
        if self.running:
            return self.interval - since_run
        if self.next_expiry is None:
            return None  # idle and no lease anywhere: nothing can expire
        # Not before the sweep is due again, so an expiry that another worker is
        # recovering right now does not make this one spin.
        until = (self.next_expiry - timezone.now()).total_seconds()
        return max(until, self.interval - since_run)


class LeaseExtension(Service):
    """Push out the lease of each running job once a third of it is used, so a run
    survives two missed renewals before its lease runs out."""

    name = "leases"

    def __init__(
        self, db: DbCall, *, interval: float, worker_id: str, running: Mapping[uuid.UUID, Running]
    ) -> None:
        self.db = db
        self.interval = interval
        self.worker_id = worker_id
        self.running = running

    def run(self) -> None:
        now = timezone.now()
        by_lease: dict[timedelta, list[Running]] = {}
        for r in self.running.values():
            if r.expires_at - now < r.lease * 2 / 3:
                by_lease.setdefault(r.lease, []).append(r)
        for lease, group in by_lease.items():
            until = now + lease
            runs = {r.job.id: r.job.run_count for r in group}
            done = self.db(
                partial(store.extend_leases, worker_id=self.worker_id, runs=runs, until=until)
            )
            if done is not None:
                for r in group:
                    r.expires_at = until

    def wake_in(self, since_run: float) -> float | None:
        if not self.running:
            return None
        now = timezone.now()
        due = min(r.expires_at - r.lease * 2 / 3 for r in self.running.values())
        return (due - now).total_seconds()


class Timeouts(Service):
    """Give up on runs that outlast their task's ``timeout``: ``on_timeout`` settles each
    as a failure and takes it off the worker's books (its thread is abandoned). An atomic
    run still holding its transaction at its ``warn_at`` is logged, once, with its kind:
    a long open transaction holds locks and keeps vacuum from cleaning up behind it."""

    name = "timeouts"

    def __init__(
        self,
        *,
        interval: float,
        running: Mapping[uuid.UUID, Running],
        on_timeout: Callable[[Running], None],
        atomic_warn_after: timedelta | None = None,
    ) -> None:
        self.interval = interval
        self.running = running
        self.on_timeout = on_timeout
        self.atomic_warn_after = atomic_warn_after

    def run(self) -> None:
        now = time.monotonic()
        for r in [r for r in self.running.values() if _watched(r)]:
            if r.warn_at is not None and r.warn_at <= now:
                r.warn_at = None
                logger.warning(
                    "job=%s kind=%s run=%d: this atomic run has held its transaction open "
                    "for over %s (ATOMIC_WARN_AFTER); an atomic task suits short database "
                    "work: see ctx.settle_now() for long ones",
                    r.job.id,
                    r.job.kind,
                    r.job.run_count,
                    self.atomic_warn_after,
                )
            if r.deadline is not None and r.deadline <= now:
                self.on_timeout(r)

    def wake_in(self, since_run: float) -> float | None:
        due = [
            t
            for r in self.running.values()
            if _watched(r)
            for t in (r.deadline, r.warn_at)
            if t is not None
        ]
        return min(due) - time.monotonic() if due else None


def _watched(r: Running) -> bool:
    return not r.ended and (r.deadline is not None or r.warn_at is not None)


class CancelChecks(Service):
    """Tell running jobs that an operator asked to cancel them (``ctx.cancelled``)."""

    name = "cancel"

    def __init__(
        self, db: DbCall, *, interval: float, running: Mapping[uuid.UUID, Running]
    ) -> None:
        self.db = db
        self.interval = interval
        self.running = running

    def run(self) -> None:
        if not self.running:
            return
        wanted = self.db(partial(store.cancel_requested, job_ids=list(self.running)))
        for job_id in wanted or ():
            running = self.running.get(job_id)
            if running is not None and not running.ctx.cancelled.is_set():
                logger.info("cancel requested for job=%s", job_id)
                running.ctx.cancelled.set()

    def wake_in(self, since_run: float) -> float | None:
        return self.interval - since_run if self.running else None


class Heartbeat(Service):
    """Record that this worker is alive, and how many jobs it has settled."""

    name = "heartbeat"

    def __init__(
        self, db: DbCall, *, interval: float, worker_id: str, jobs_done: Callable[[], int]
    ) -> None:
        self.db = db
        self.interval = interval
        self.worker_id = worker_id
        self.jobs_done = jobs_done

    def run(self) -> None:
        self.db(partial(store.beat, worker_id=self.worker_id, jobs_done=self.jobs_done()))


class Retention(Service):
    """Delete finished jobs older than each status's ``RETENTION``."""

    name = "retention"

    def __init__(self, db: DbCall, *, interval: float, keep: Mapping[str, timedelta]) -> None:
        self.db = db
        self.interval = interval
        self.keep = keep

    def run(self) -> None:
        for status, keep in self.keep.items():
            self.db(partial(store.cleanup, finished_before=timezone.now() - keep, status=status))


class LimitRefresh(Service):
    """Keep the worker's ``max_in_flight`` per kind current: re-read the run-time limits
    every ``every`` seconds while the worker turns, and on its next turn once ``stale``
    is set (a NOTIFY said they changed). It never wakes the worker by itself."""

    name = "limits"
    interval = 0.0  # looked at every turn; ``every`` is its own clock

    def __init__(
        self,
        db: DbCall,
        *,
        every: float,
        kinds: list[str],
        on_change: Callable[[dict[str, int]], None],
    ) -> None:
        self.db = db
        self.every = every
        self.kinds = kinds
        self.on_change = on_change
        self.stale = True
        self.read_at = 0.0
        self.ready = False  # read once at least: until then the worker claims nothing

    def run(self) -> None:
        now = time.monotonic()
        if not self.stale and now - self.read_at < self.every:
            return
        self.stale = False  # before reading: a NOTIFY during the read marks it again
        found = self.db(partial(limiting.max_in_flight, self.kinds, max_age=0))
        if found is None:
            self.stale = True  # the database is away: try again next turn
            return
        self.read_at = now
        self.ready = True
        self.on_change(found)

    def wake_in(self, since_run: float) -> float | None:
        return None
