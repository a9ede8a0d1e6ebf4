"""Deleting finished jobs and their journal, in short batches."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction

from django_jobqueue.models import TERMINAL, Job, JournalEntry

from . import sql
from .history import names


def cleanup(
    *,
    finished_before: datetime,
    kind: str | None = None,
    status: str | Sequence[str] | None = None,
    batch_size: int = 1000,
    dry_run: bool = False,
) -> int:
    """Delete finished jobs (and their journal) in batches, each its own short transaction.

    Only completed, dead and cancelled jobs are ever deleted. Returns the count (with
    ``dry_run``, the count that would be deleted).
    """
    statuses = [status] if isinstance(status, str) else list(status or TERMINAL)
    bad = sorted(set(statuses) - set(TERMINAL))
    if bad:
        raise ValueError(
            f"cleanup deletes only finished jobs ({', '.join(TERMINAL)}), not {', '.join(bad)}"
        )
    qs = sql.jobs().filter(status__in=statuses, finished_at__lt=finished_before)
    if kind:
        qs = qs.filter(kind=names("kind", kind))
    if dry_run:
        return qs.count()
    alias = sql.alias()
    total = 0
    while True:
        with transaction.atomic(using=alias):
            ids = list(
                sql.lockable(qs.order_by("finished_at"), skip_locked=True).values_list(
                    "id", flat=True
                )[:batch_size]
            )
            if not ids:
                break
            JournalEntry.objects.using(alias).filter(job_id__in=ids).delete()
            _, per_model = Job.objects.using(alias).filter(id__in=ids, status__in=statuses).delete()
        total += per_model.get(Job._meta.label, 0)
        if len(ids) < batch_size:
            break
    return total
