"""What the worker's maintenance services share: their shape, their timings, the loop
that drives them, and what the worker tells them of a running job. The services
themselves are the package's other modules (recovery, leases, timeouts, cancels,
heartbeat, retention, limits, scheduler, history, statistics).

Each is a small object of one shape (a ``name``, an ``interval`` in seconds and a
``run()``), driven by one ``Maintenance`` loop inside the worker; ``wake_in`` tells
the worker how soon a service needs it awake again. Every interval is in ``Timings``,
in one place. Database calls go through the worker's guarded call (``db``), so a lost
connection costs a service one turn, never the worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django_jobqueue.task import limiting

if TYPE_CHECKING:
    from django_jobqueue.conf import Settings
    from django_jobqueue.run.context import Context
    from django_jobqueue.store import Claimed

logger = logging.getLogger("django_jobqueue")

# The worker's guarded database call: the call's result, or None after a connection error.
DbCall = Callable[[Callable[[], Any]], Any]

MIN_WAIT = 0.05  # seconds: the shortest sleep a service may ask for (no busy loop)


@dataclass(frozen=True)
class Timings:
    """How often each service runs, in seconds."""

    recover: float = 1.0  # sweep for expired leases (a dead worker's jobs)
    cancel_check: float = 1.0  # look for operator cancels of the jobs this worker runs
    progress: float = 1.0  # at most this often, write the progress running jobs reported
    heartbeat: float = 10.0  # keep this worker listed as alive
    lease_check: float = 0.0  # every turn: a lease is extended once a third of it is used
    timeout_check: float = 0.0  # every turn: a run past its task's timeout is given up
    retention: float = 300.0  # delete finished jobs past RETENTION (RETENTION_INTERVAL)
    limits: float = limiting.REFRESH  # re-read the run-time limits (at once when told)
    schedules: float = 1.0  # at most this often, look for a periodic schedule's due tick
    history: float = 10.0  # add the tally's new runs to the run history's current minute
    statistics: float = 2.0  # gather the jobs table's planner statistics if stale

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
    # When a slot began running it (None while it waits for one): a run handed back at
    # shutdown is logged and journalled with how long it ran.
    started_at: datetime | None = None


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


def watched(r: Running) -> bool:
    return not r.ended and (r.deadline is not None or r.warn_at is not None)
