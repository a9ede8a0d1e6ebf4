"""The statistics keeper: keeps the jobs table fit for the claim. It gathers the table's
planner statistics when they have gone stale (``store.gather_statistics``), so that a
claim after a bulk load is planned on the table as it is, not as the last ANALYZE saw
it (a table only changed in place, as a drain changes it, at most once a minute:
``store.tables.STATISTICS_CHANGED_EVERY``); and it vacuums the table when dead row
versions pile up (``store.vacuum_jobs``), so that a claim does not walk past the index
entries of every job drained since; sooner once this worker has caught up (its last
claim took less than it had room for, no run going), so that in a table holding a big
history of finished jobs its next pickups do not walk them either.

PostgreSQL's autovacuum does both, but only once a minute at its defaults (and only
once a fifth of the table is dead), and not at all where it is off; until it does, a
claim of a table that was empty at its last ANALYZE reads and sorts every pending row,
and a deep backlog drains slower the more of it is done. Every worker asks (one row
of ``pg_stat_user_tables``, ``store.upkeep_due``, for both), at most every ``interval``
seconds of its turns (it never wakes an idle worker); an advisory lock lets one of them
gather at a time, and a vacuum already going (another worker's, or autovacuum's) is
left to finish.

The vacuum runs on a thread and a connection of its own: it reads every index of the
table whole (a tenth of a second for a hundred thousand rows, more for more), and the
loop's turns go on meanwhile.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from functools import partial

from django.db import DatabaseError, connections

from django_jobqueue import routing, store
from django_jobqueue.worker.services.base import DbCall, Running, Service

logger = logging.getLogger("django_jobqueue")


class StatisticsKeeper(Service):
    """Refresh the jobs table's planner statistics when stale, and vacuum it when dead
    row versions pile up, every ``interval`` s."""

    name = "statistics"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        running: Mapping[uuid.UUID, Running],
        caught_up: Callable[[], bool | None],
        alias: str | None = None,
    ) -> None:
        self.db = db
        self.interval = interval
        self.running = running
        self.caught_up = caught_up
        self.alias = alias or routing.current()
        self._vacuum: threading.Thread | None = None
        self._busy = False  # the last look found the worker not caught up

    def run(self) -> None:
        # The worker's last claim took less than it had room for and no run is going:
        # the queue keeps up, and a vacuum comes sooner. Busy: a run going, or a claim
        # that filled its room. Neither before a first claim (None): a worker just
        # started on a backlog is not idle, and one started on nothing is not woken.
        caught = self.caught_up()
        going = not all(r.ended for r in self.running.values())
        idle = caught is True and not going
        self._busy = caught is False or going
        due = self.db(partial(store.upkeep_due, idle=idle))  # None: the database is away
        if due is None:
            return
        if due.analyze:
            self.db(store.gather_statistics)
        if not due.vacuum or self.vacuuming():
            return
        self._vacuum = threading.Thread(
            target=self._vacuum_jobs, name="jobqueue-vacuum", daemon=True
        )
        self._vacuum.start()

    def vacuuming(self) -> bool:
        """Whether this worker's vacuum is still going."""
        return self._vacuum is not None and self._vacuum.is_alive()

    def _vacuum_jobs(self) -> None:
        try:
            with routing.using(self.alias):
                store.vacuum_jobs()
        except DatabaseError:
            # The next turn asks again; the loop's own connection is untouched.
            logger.warning("vacuum of the jobs table failed", exc_info=True)
        finally:
            connections.close_all()  # this thread's own

    def wake_in(self, since_run: float) -> float | None:
        """Once after a busy spell (the last look found the worker not caught up), so the
        drain's dead rows are vacuumed at the idle threshold while the worker waits, not
        at the start of its next burst; otherwise never: an idle worker has no claims to
        plan, and the work that needs fresh statistics wakes it itself (a bulk load's
        NOTIFY, a drain's turns); an idle worker woken for this would also claim each
        time, a poll by another name."""
        return self.interval - since_run if self._busy else None
