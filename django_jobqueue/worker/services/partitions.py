"""The partitioned journal's upkeep (PostgreSQL, once ``jobqueue partitions --convert``
made it): partitions made periods ahead, and the parent analyzed on a schedule.

Every worker runs it; it costs one catalog read per interval where the journal is one
table (then it does nothing more). Making a partition waits at most a moment for its
lock and otherwise leaves it to the next run, which is why they are made well ahead.
Analyzing is one worker's at a time (the database lets one in) and only when the parent
was last analyzed longer ago than its interval: autovacuum analyzes the partitions but
never the parent, and the planner needs the parent's statistics for any query over
several partitions (without them it plans every partition as if empty or huge)."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from django.db import DatabaseError

from django_jobqueue import store
from django_jobqueue.errors import PartitionError
from django_jobqueue.worker.services.base import DbCall, Service, logger


class Partitions(Service):
    """Make the journal's partitions ``ahead`` periods ahead and analyze its parent every
    ``analyze_every``, every ``interval`` seconds, where the journal is partitioned."""

    name = "partitions"

    def __init__(
        self, db: DbCall, *, interval: float, ahead: int, analyze_every: timedelta
    ) -> None:
        self.db = db
        self.interval = interval
        self.ahead = ahead
        self.analyze_every = analyze_every

    def run(self) -> None:
        layout = self.db(partial(store.journal_layout))
        if layout is None:
            return
        try:
            made = self.db(partial(store.make_ahead, ahead=self.ahead, layout=layout))
            if made:
                days = ", ".join(f"{d:%Y-%m-%d}" for d in made)
                logger.info("journal partitions made from %s", days)
            analyzed = partial(store.analyze_journal, every=self.analyze_every, layout=layout)
            if self.db(analyzed):
                logger.info("journal's partitioned parent analyzed")
        except (DatabaseError, PartitionError) as exc:
            # Never the worker's end: the partitions are made periods ahead, and the
            # next run (or jobqueue partitions) tries again.
            logger.warning("journal partitions' upkeep failed, tried again later: %s", exc)
