"""Reading jobs: one job, its journal, and history paged along the primary key."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TypedDict, Unpack

from django.db.models import QuerySet

from django_jobqueue import validation
from django_jobqueue.errors import InvalidFilter, JobNotFound, UnknownFilter
from django_jobqueue.ids import uuid7_floor
from django_jobqueue.models import Job, JournalEntry, Status
from django_jobqueue.store import sql
from django_jobqueue.store.partitions import CLOCK_SKEW


def get_job(*, job_id: uuid.UUID | str) -> Job:
    try:
        return sql.jobs().get(id=as_uuid(job_id))
    except Job.DoesNotExist:
        raise JobNotFound(f"No job with id {job_id}", job_id=job_id) from None


def journal(
    *, job_id: uuid.UUID | str, last: int | None = None, since: datetime | None = None
) -> list[JournalEntry]:
    """A job's journal, oldest first; with ``last``, only its latest ``last`` entries.
    ``since``: the job's creation, when the caller has it: its entries are recorded from
    then on (less CLOCK_SKEW), so a partitioned journal reads only the partitions from
    there (the others are pruned from the plan)."""
    entries = sql.journal_entries().filter(job_id=as_uuid(job_id))
    if since is not None:
        entries = entries.filter(recorded_at__gte=since - CLOCK_SKEW)
    if last is None:
        return list(entries.order_by("id"))
    return list(reversed(entries.order_by("-id")[:last]))


def names(what: str, value: object) -> str:
    """A kind or queue a filter names: text the database can compare (InvalidFilter if not)."""
    return validation.bounded_text(
        value, name=what, error=partial(InvalidFilter, argument=what), max_length=200
    )


def as_uuid(value: uuid.UUID | str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise JobNotFound(f"{value!r} is not a job id (expected a UUID)", job_id=value) from None


@dataclass(frozen=True)
class Page:
    """One page of history; pass ``next_cursor`` back as ``after`` for the next one."""

    jobs: list[Job]
    next_cursor: str | None


def created_ids(
    after: datetime | None = None, before: datetime | None = None
) -> dict[str, uuid.UUID]:
    """Primary-key lookups that hold every job created in [``after``, ``before``): what
    lets a range of ``created_at``, which has no index of its own (migration 0029), be
    read along the primary key. A job's id is a UUIDv7 its enqueuer drew when it made
    the row, and ``created_at`` is the same clock's reading then; the bounds reach
    CLOCK_SKEW further (a clock stepped back keeps a process's ids ahead of its clock
    until it catches up), as the journal's bounds by a job's creation do. They narrow
    what is read; the ``created_at`` condition beside them decides what is selected."""
    bounds = {}
    if after is not None:
        bounds["id__gte"] = uuid7_floor(after - CLOCK_SKEW)
    if before is not None:
        bounds["id__lt"] = uuid7_floor(before + CLOCK_SKEW)
    return bounds


def _encode_cursor(job: Job) -> str:
    return str(job.id)


def _decode_cursor(cursor: str) -> uuid.UUID:
    """The last job id of the previous page. A cursor of the versions that paged on
    (created_at, id), ``<time>|<id>``, is read by its id: the same position."""
    stamp, bar, last_id = cursor.rpartition("|")
    try:
        if bar:
            datetime.fromisoformat(stamp)
        return uuid.UUID(last_id)
    except ValueError:
        raise InvalidFilter(f"Invalid history cursor {cursor!r}", argument="after") from None


class HistoryFilters(TypedDict, total=False):
    """What ``history`` selects on, and how it pages (every key optional)."""

    kind: str | Sequence[str] | None  # a kind or several
    queue: str | None
    status: str | Sequence[str] | None  # a status or several
    created_after: datetime | None  # created at or after
    created_before: datetime | None
    finished_after: datetime | None  # finished at or after
    finished_before: datetime | None
    after: str | None  # the previous page's ``next_cursor``
    limit: int  # jobs per page (default 100)
    newest_first: bool


def history(**filters: Unpack[HistoryFilters]) -> Page:
    """Jobs matching the filters in the order they were created, a keyset page on the
    primary key (a UUIDv7 of the job's creation).

    Pages stay stable while rows are inserted and deleted between requests: each page
    starts strictly after the last row of the previous one.
    """
    unknown = sorted(set(filters) - set(HistoryFilters.__annotations__))
    if unknown:
        raise UnknownFilter(
            f"history() got unknown filter(s) {', '.join(unknown)}; "
            f"known: {', '.join(HistoryFilters.__annotations__)}",
            argument=unknown[0],
        )
    limit = filters.get("limit", 100)
    newest_first = filters.get("newest_first", False)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidFilter(f"limit must be a positive int, got {limit!r}", argument="limit")
    qs = _filtered(filters)
    after = filters.get("after")
    if after:
        last_id = _decode_cursor(after)
        qs = qs.filter(id__lt=last_id) if newest_first else qs.filter(id__gt=last_id)
    rows = list(qs.order_by("-id" if newest_first else "id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(jobs=rows, next_cursor=_encode_cursor(rows[-1]) if more and rows else None)


_PAGING = frozenset({"after", "limit", "newest_first"})


def history_count(**filters: Unpack[HistoryFilters]) -> int:
    """How many jobs ``history`` would page through with these filters (paging keys
    aside): what a bulk operation reports before it acts."""
    refused = sorted(set(filters) - set(HistoryFilters.__annotations__) | _PAGING & set(filters))
    if refused:
        raise UnknownFilter(
            f"history_count() got unknown filter(s) {', '.join(refused)}", argument=refused[0]
        )
    return _filtered(filters).count()


# filter key -> lookup; absent or empty values select everything
_RANGES = {
    "created_after": "created_at__gte",
    "created_before": "created_at__lt",
    "finished_after": "finished_at__gte",
    "finished_before": "finished_at__lt",
}


def several(value: object) -> list[object]:
    """A filter's one value or several (a value that is neither is checked as one)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return [value]
    return list(value)


def _filtered(filters: HistoryFilters) -> QuerySet[Job]:
    qs = sql.jobs()
    kind = filters.get("kind")
    if kind:
        qs = qs.filter(kind__in=[names("kind", k) for k in several(kind)])
    queue = filters.get("queue")
    if queue:
        qs = qs.filter(queue=names("queue", queue))
    status = filters.get("status")
    if status:
        statuses = several(status)
        unknown = sorted(map(str, set(statuses) - set(Status.values)))
        if unknown:
            raise InvalidFilter(
                f"Unknown status {', '.join(unknown)}; known: {', '.join(Status.values)}",
                argument="status",
            )
        qs = qs.filter(status__in=statuses)
    for key, lookup in _RANGES.items():
        value = filters.get(key)
        if value:
            if not isinstance(value, datetime):
                raise InvalidFilter(f"{key} must be a datetime, got {value!r}", argument=key)
            qs = qs.filter(**{lookup: value})
    return qs.filter(**created_ids(filters.get("created_after"), filters.get("created_before")))
