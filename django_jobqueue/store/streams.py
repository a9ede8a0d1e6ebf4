"""Job streams' storage: the items a run writes (``ctx.stream.write``), appended under
the job row's guard, and the reads that follow them.

A write holds the job's row under its run's guard (status claimed, ``claimed_by``, run
number) and appends its items after the stream's last offset, in one transaction (a
savepoint in the caller's): a run whose claim was lost stores nothing, and as only the
run holding the row appends, offsets follow each other without gaps in the order they
were written. Items written inside a durable step are appended by the transaction that
records the step (``store.durable.record``), so they are stored exactly when the step
is. An item written outside any step carries its position among the run's writes
outside steps (``write_no``, unique per job); the writer skips a position the job
already holds (``positions``), and the unique constraint refuses a second one.

On PostgreSQL each write notifies ``wakeups.STREAM_CHANNEL`` with the job id, delivered
on commit; readers elsewhere poll.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Max, Min, QuerySet, Sum
from django.utils import timezone

from django_jobqueue import validation
from django_jobqueue.models import Status, StreamItem
from django_jobqueue.store import sql, wakeups
from django_jobqueue.store.dialects.base.settling import GUARD_PARAMS
from django_jobqueue.store.dialects.base.storage import NewStreamItem


@dataclass(frozen=True, slots=True)
class NewItem:
    """One item to store: its value (checked JSON), the size of its JSON text in bytes,
    the durable step it was written in ("" for none) and, outside a step, its position
    among the run's writes outside steps."""

    value: Any
    size: int
    step: str = ""
    write_no: int | None = None


@dataclass(frozen=True, slots=True)
class Totals:
    """What a job's stream holds: how many items, and their JSON in bytes."""

    count: int
    size: int


def items() -> QuerySet[StreamItem]:
    return StreamItem.objects.using(sql.alias())


def totals(*, job_id: uuid.UUID) -> Totals:
    found = items().filter(job_id=job_id).aggregate(n=Count("id"), size=Sum("size"))
    return Totals(count=found["n"] or 0, size=found["size"] or 0)


def positions(*, job_id: uuid.UUID) -> list[int]:
    """The positions (``write_no``) of the job's items written outside steps."""
    rows = items().filter(job_id=job_id, write_no__isnull=False).values_list("write_no", flat=True)
    return [n for n in rows if n is not None]


def append(*, job_id: uuid.UUID, run_no: int, worker_id: str, item: NewItem) -> bool:
    """Append one item written outside any step (its ``write_no`` one the job does not
    hold yet: the unique constraint refuses a second) by a guarded write, in one
    statement on PostgreSQL, notifying the readers; whether the guard held (if not,
    nothing is stored)."""
    d = sql.dialect()
    guard = sql.Fragment(GUARD_PARAMS, [d.job_id(job_id), Status.CLAIMED.value, worker_id, run_no])
    assert item.write_no is not None
    new = NewStreamItem(
        job_id=job_id,
        value=validation.dumps(item.value),
        run=run_no,
        write_no=item.write_no,
        written_at=timezone.now(),
    )
    return d.append_stream(guard=guard, item=new, channel=wakeups.STREAM_CHANNEL)


def insert_held(*, job_id: uuid.UUID, run_no: int, new: Sequence[NewItem]) -> list[int]:
    """Append ``new`` after the stream's last offset, in the caller's transaction, which
    holds the job's row under its run's guard; their offsets. Notifies the readers."""
    if not new:
        return []
    last = items().filter(job_id=job_id).aggregate(last=Max("offset"))["last"] or 0
    now = timezone.now()
    rows = [
        StreamItem(
            job_id=job_id,
            offset=last + i,
            value=n.value,
            size=n.size,
            run=run_no,
            step=n.step,
            write_no=n.write_no,
            written_at=now,
        )
        for i, n in enumerate(new, start=1)
    ]
    items().bulk_create(rows)
    wakeups.announce_stream(sql.alias(), job_id)
    return [r.offset for r in rows]


def read(*, job_id: uuid.UUID, after: int, limit: int) -> list[tuple[int, Any]]:
    """Up to ``limit`` items of the job's stream after offset ``after``, as (offset,
    value), in order (a value that cannot be decoded as ``validation.Undecodable``)."""
    rows = (
        items()
        .filter(job_id=job_id, offset__gt=after)
        .order_by("offset")
        .values_list("offset", "value")[:limit]
    )
    return list(rows)


def last(*, job_id: uuid.UUID, count: int) -> list[StreamItem]:
    """The job's last ``count`` items, oldest first (what the job page shows)."""
    newest = list(items().filter(job_id=job_id).order_by("-offset")[:count])
    return newest[::-1]


def status_of(*, job_id: uuid.UUID) -> str | None:
    """The job's status now (None: no such job)."""
    return sql.jobs().filter(id=job_id).values_list("status", flat=True).first()


def cut(*, job_id: uuid.UUID, steps: Sequence[str]) -> int:
    """Cut the job's stream back to the first item written inside any of these durable
    steps (whose records a re-run discarded), in the caller's transaction: that item and
    every later one are deleted, so the re-run writes them again in order, from the same
    offset (the writes outside steps among them too: their positions are free again).
    Returns the items deleted (none when those steps wrote none)."""
    first = items().filter(job_id=job_id, step__in=list(steps)).aggregate(first=Min("offset"))
    if first["first"] is None:
        return 0
    return items().filter(job_id=job_id, offset__gte=first["first"]).delete()[0]
