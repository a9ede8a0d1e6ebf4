"""Timeouts: runs past their kind's hard limit (``timeout``, ``time_limit``) are given
up: settled as failed and stopped by their pool's strongest means."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from django_jobqueue.worker.services.base import Running, Service, watched

logger = logging.getLogger("django_jobqueue")


class Timeouts(Service):
    """Give up on runs that outlast their task's hard limit: ``on_timeout`` settles each
    as a failure and takes it off the worker's books (its child killed on the process
    pool, its thread abandoned otherwise). An atomic
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
        for r in [r for r in self.running.values() if watched(r)]:
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
            if watched(r)
            for t in (r.deadline, r.warn_at)
            if t is not None
        ]
        return min(due) - time.monotonic() if due else None
