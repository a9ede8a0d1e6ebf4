"""Reading jobs: one job, its journal, and keyset-paginated history."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings as django_settings
from django.db.models import Q
from django.utils import timezone

from django_jobqueue.errors import JobNotFound
from django_jobqueue.models import Job, JournalEntry, Status

from . import sql


def get_job(*, job_id: uuid.UUID | str) -> Job:
    try:
        return sql.jobs().get(id=as_uuid(job_id))
    except Job.DoesNotExist:
        raise JobNotFound(f"No job with id {job_id}", job_id=job_id) from None


def journal(*, job_id: uuid.UUID | str, last: int | None = None) -> list[JournalEntry]:
    """A job's journal, oldest first; with ``last``, only its latest ``last`` entries."""
    entries = sql.journal_entries().filter(job_id=as_uuid(job_id))
    if last is None:
        return list(entries.order_by("id"))
    return list(reversed(entries.order_by("-id")[:last]))


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


def _encode_cursor(job: Job) -> str:
    return f"{job.created_at.isoformat()}|{job.id}"


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        stamp, raw_id = cursor.split("|", 1)
        at, last_id = datetime.fromisoformat(stamp), uuid.UUID(raw_id)
    except ValueError:
        raise ValueError(f"Invalid history cursor {cursor!r}") from None
    if django_settings.USE_TZ and timezone.is_naive(at):
        raise ValueError(f"Invalid history cursor {cursor!r}: its time has no timezone")
    return at, last_id


def history(
    *,
    kind: str | Sequence[str] | None = None,
    queue: str | None = None,
    status: str | Sequence[str] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    finished_after: datetime | None = None,
    finished_before: datetime | None = None,
    after: str | None = None,
    limit: int = 100,
    newest_first: bool = False,
) -> Page:
    """Jobs matching the filters, a keyset page on (created_at, id).

    Pages stay stable while rows are inserted and deleted between requests: each page
    starts strictly after the last row of the previous one.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    qs = sql.jobs()
    if kind:
        qs = qs.filter(kind__in=[kind] if isinstance(kind, str) else list(kind))
    if queue:
        qs = qs.filter(queue=queue)
    if status:
        statuses = [status] if isinstance(status, str) else list(status)
        unknown = sorted(set(statuses) - set(Status.values))
        if unknown:
            raise ValueError(
                f"Unknown status {', '.join(unknown)}; known: {', '.join(Status.values)}"
            )
        qs = qs.filter(status__in=statuses)
    if created_after:
        qs = qs.filter(created_at__gte=created_after)
    if created_before:
        qs = qs.filter(created_at__lt=created_before)
    if finished_after:
        qs = qs.filter(finished_at__gte=finished_after)
    if finished_before:
        qs = qs.filter(finished_at__lt=finished_before)
    if after:
        stamp, last_id = _decode_cursor(after)
        if newest_first:
            qs = qs.filter(Q(created_at__lt=stamp) | Q(created_at=stamp, id__lt=last_id))
        else:
            qs = qs.filter(Q(created_at__gt=stamp) | Q(created_at=stamp, id__gt=last_id))
    order = ("-created_at", "-id") if newest_first else ("created_at", "id")
    rows = list(qs.order_by(*order)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(jobs=rows, next_cursor=_encode_cursor(rows[-1]) if more and rows else None)
