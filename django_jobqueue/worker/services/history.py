"""The history sampler: adds the runs the tally gained since the last sample to the
current minute of the run history (``store.sample_history``). Every worker runs it;
the database lets one in per interval (a compare-and-set on the sampler's clock row),
so more workers sample no more often. It reads a few tally rows and writes a few
minute rows: the settlements themselves write nothing for the history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.worker.services.base import DbCall, Service


class HistorySampler(Service):
    """Sample the run tally into the per-minute history, every ``interval`` seconds."""

    name = "history"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.db = db
        self.interval = interval
        self.clock = clock

    def run(self) -> None:
        # Another worker's sample within most of an interval is as good as this one.
        gap = timedelta(seconds=self.interval * 0.8)
        self.db(partial(store.sample_history, now=self.clock(), min_gap=gap))
