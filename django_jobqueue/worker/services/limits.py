"""Run-time limits: the limits operators set (set_limit), re-read on an interval."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from django_jobqueue.task import limiting

if TYPE_CHECKING:
    from django_jobqueue.store import KeyRule
from django_jobqueue.worker.services.base import DbCall, Service


class LimitRefresh(Service):
    """Keep the worker's ``max_in_flight`` per kind and its per-key rules current (handed
    to ``on_change`` as ``limiting.claim_limits`` gives them): re-read the run-time limits
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
        on_change: Callable[[tuple[dict[str, int], dict[str, KeyRule]]], None],
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
        found = self.db(partial(limiting.claim_limits, self.kinds, max_age=0))
        if found is None:
            self.stale = True  # the database is away: try again next turn
            return
        self.read_at = now
        self.ready = True
        self.on_change(found)

    def wake_in(self, since_run: float) -> float | None:
        return None
