"""The scheduler: the worker's maintenance service that enqueues periodic jobs.

Every worker runs it; none is elected. It looks at the schedules no more often than
its interval, and touches the database only when one of them has a tick due: then it
asks ``store.record_tick`` to enqueue that tick, which the database grants to exactly
one worker (a compare-and-set on the schedule's row, in the enqueue's transaction).
A worker with no schedules gets no scheduler at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.rules.cron import GRACE, due_ticks
from django_jobqueue.store import ScheduleState
from django_jobqueue.task import signalling
from django_jobqueue.task.handle import JobHandle
from django_jobqueue.task.periodic import ScheduleDef
from django_jobqueue.worker.services.base import DbCall, Service

logger = logging.getLogger("django_jobqueue")


class Scheduler(Service):
    """Enqueue each schedule's due ticks; sleep until the next one."""

    name = "schedules"

    def __init__(
        self,
        db: DbCall,
        *,
        interval: float,
        schedules: list[ScheduleDef],
        grace: timedelta = GRACE,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.db = db
        self.clock = clock
        self.interval = interval
        self.schedules = schedules
        self.grace = grace
        self._states: dict[str, ScheduleState] | None = None
        # When each schedule next needs a look (its next tick; now, to retry a failure).
        self._next: dict[str, datetime] = {}

    def run(self) -> None:
        now = self.clock()
        if self._states is None:
            states = self.db(
                partial(store.schedule_states, names=[s.name for s in self.schedules], create=True)
            )
            if states is None:
                return  # database trouble: try again next time
            self._states = states
        for schedule in self.schedules:
            due_at = self._next.get(schedule.name)
            if due_at is not None and now < due_at:
                continue
            if self._fire(schedule, now):
                self._next[schedule.name] = schedule.cron.next_after(now)
            else:
                self._next[schedule.name] = now  # retry at the next run

    def _fire(self, schedule: ScheduleDef, now: datetime) -> bool:
        """Enqueue what is due of ``schedule``; False if the database could not be reached
        (the ticks are looked at again next time)."""
        assert self._states is not None
        state = self._states.get(schedule.name) or ScheduleState(name=schedule.name, created_at=now)
        try:
            ticks = due_ticks(
                schedule.cron,
                now=now,
                last_tick=state.last_tick,
                since=state.created_at,
                catch_up=schedule.catch_up,
                grace=self.grace,
            )
            for tick in ticks:
                request = schedule.request(tick)
                result = self.db(
                    partial(store.record_tick, name=schedule.name, tick=tick, request=request)
                )
                if result is None:
                    return False
                self._states[schedule.name] = result.state
                if result.job_id is not None:
                    # Committed by now: job_enqueued receivers hear of it at once.
                    handle = JobHandle(store.NewJob(result.job_id, request.kind), "inserted")
                    signalling.enqueued([request], [handle])
                    logger.info(
                        "schedule %s: enqueued job=%s kind=%s for tick %s",
                        schedule.name,
                        result.job_id,
                        schedule.kind,
                        tick.isoformat(),
                    )
        except Exception:
            # A schedule that cannot be enqueued (its task changed, a payload grown past
            # MAX_PAYLOAD_BYTES, a database error that is not the connection's) is
            # logged and tried again at its next tick; it never stops the worker.
            logger.exception("schedule %s: could not enqueue its tick", schedule.name)
        return True

    def wake_in(self, since_run: float) -> float | None:
        if not self._next:
            return self.interval - since_run
        until = (min(self._next.values()) - self.clock()).total_seconds()
        return max(until, self.interval - since_run)
