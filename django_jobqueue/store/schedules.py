"""Periodic schedules' durable state: which tick of each was last enqueued.

One ``Schedule`` row per schedule name. A worker that sees a tick due enqueues its
job in the same transaction as a compare-and-set on that row
(``UPDATE … SET last_tick = tick WHERE last_tick < tick``): the first worker's update
wins, the others' match no row once it commits (on PostgreSQL they wait for its row
lock, then re-read; SQLite runs writers one at a time), and a worker killed inside
the transaction leaves nothing behind, so another does the tick. An idempotency key
per schedule and tick (``periodic:NAME:TICK``) guards the job on top of that.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from django_jobqueue.models import Schedule
from django_jobqueue.store import sql
from django_jobqueue.store.inserting import EnqueueRequest, enqueue


@dataclass(frozen=True)
class ScheduleState:
    """What the database knows of one schedule."""

    name: str
    created_at: datetime
    last_tick: datetime | None = None
    last_job_id: uuid.UUID | None = None
    ticked_at: datetime | None = None

    @classmethod
    def of(cls, row: Schedule) -> ScheduleState:
        return cls(
            name=row.name,
            created_at=row.created_at,
            last_tick=row.last_tick,
            last_job_id=row.last_job_id,
            ticked_at=row.ticked_at,
        )


@dataclass(frozen=True)
class TickResult:
    """A tick's outcome: the job enqueued for it (None: an earlier call already did
    this tick or a later one), and the schedule's state afterwards."""

    job_id: uuid.UUID | None
    state: ScheduleState


def tick_key(name: str, tick: datetime) -> str:
    """The idempotency key of a schedule's job for one tick."""
    return f"periodic:{name}:{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _create(rows: QuerySet[Schedule], names: Sequence[str], now: datetime) -> None:
    """A row for each of ``names`` that has none. Workers starting together insert the
    same names at once, and InnoDB may pick one such insert as a deadlock's victim (seen
    on MariaDB with eight at once): it is its own transaction, so it is run again."""
    new = [Schedule(name=name, created_at=now) for name in names]
    sql.dialect().retrying_deadlocks(lambda: rows.bulk_create(new, ignore_conflicts=True))


def schedule_states(*, names: Sequence[str], create: bool = False) -> dict[str, ScheduleState]:
    """The state of each named schedule; with ``create``, a row is made for each that
    has none (first seen now)."""
    alias = sql.alias()
    rows = Schedule.objects.using(alias)
    if create and names:
        _create(rows, names, timezone.now())
    return {row.name: ScheduleState.of(row) for row in rows.filter(name__in=list(names))}


def record_tick(*, name: str, tick: datetime, request: EnqueueRequest) -> TickResult:
    """Enqueue ``request`` as the job of ``tick`` unless this tick, or a later one, is
    already recorded for schedule ``name``: the compare-and-set and the enqueue commit
    together or not at all."""
    alias = sql.alias()
    rows = Schedule.objects.using(alias)
    now = timezone.now()
    if not rows.filter(name=name).exists():
        # Made in a transaction of its own, before the compare-and-set's: on MySQL/MariaDB
        # the losers of a race to insert one key keep share locks on the row, and their
        # updates would deadlock on one another if they were in the same transaction.
        _create(rows, [name], now)
    older = rows.filter(name=name).filter(Q(last_tick__isnull=True) | Q(last_tick__lt=tick))
    with transaction.atomic(using=alias):
        won = older.update(last_tick=tick, ticked_at=now)
        if not won:
            row = rows.filter(name=name).first()
            if row is not None:
                return TickResult(job_id=None, state=ScheduleState.of(row))
            # No row yet (deleted, or never seen): make it, then try again.
            rows.bulk_create([Schedule(name=name, created_at=now)], ignore_conflicts=True)
            won = older.update(last_tick=tick, ticked_at=now)
            if not won:
                return TickResult(job_id=None, state=ScheduleState.of(rows.get(name=name)))
        job, _ = enqueue(request)
        rows.filter(name=name).update(last_job_id=job.id)
        return TickResult(job_id=job.id, state=ScheduleState.of(rows.get(name=name)))


def last_jobs(*, job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The status of each of these jobs that still exists (cleanup may have removed it)."""
    if not job_ids:
        return {}
    return dict(sql.jobs().filter(id__in=list(job_ids)).values_list("id", "status"))


__all__ = ["ScheduleState", "TickResult", "last_jobs", "record_tick", "schedule_states", "tick_key"]
