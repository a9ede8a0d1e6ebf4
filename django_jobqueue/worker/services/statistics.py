"""The statistics keeper: gathers the jobs table's planner statistics when they have
gone stale (``store.refresh_statistics``), so that a claim after a bulk load is planned
on the table as it is, not as the last ANALYZE saw it.

PostgreSQL's autovacuum does the same, but only once a minute at its defaults, and not
at all where it is off; until it does, every claim of a table that was empty at its last
ANALYZE reads and sorts every pending row. Every worker asks (one row of
``pg_stat_user_tables``), at most every ``interval`` seconds of its turns (it never
wakes an idle worker); an advisory lock lets one of them gather at a time, and the
statistics it gathers answer the others' next question.
"""

from __future__ import annotations

from django_jobqueue import store
from django_jobqueue.worker.services.base import DbCall, Service


class StatisticsKeeper(Service):
    """Refresh the jobs table's planner statistics when stale, every ``interval`` s."""

    name = "statistics"

    def __init__(self, db: DbCall, *, interval: float) -> None:
        self.db = db
        self.interval = interval

    def run(self) -> None:
        self.db(store.refresh_statistics)

    def wake_in(self, since_run: float) -> float | None:
        """Never: an idle worker has no claims to plan, and the work that needs fresh
        statistics wakes it itself (a bulk load's NOTIFY, a drain's turns); an idle
        worker woken for this would also claim each time, a poll by another name."""
        return None
