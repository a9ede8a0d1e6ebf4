"""What no worker will run: pending jobs of kinds a process has no task for, queues no
task routes to and no job is in, and runnable kinds no live worker serves. Read at a
worker's start (its warnings) and by ``jobqueue health``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Count
from django.utils import timezone

from django_jobqueue.models import QueuePause, Status
from django_jobqueue.store import sql
from django_jobqueue.store.snapshot import PendingCount
from django_jobqueue.store.statistics import _unserved, _workers


def pending_kinds_except(*, kinds: Sequence[str]) -> dict[str, int]:
    """The kinds of pending jobs (due or scheduled) outside ``kinds``, with their
    counts: jobs a process that registered only ``kinds`` can never run."""
    rows = (
        sql.jobs()
        .filter(status=Status.PENDING)
        .exclude(kind__in=list(kinds))
        .values("kind")
        .annotate(n=Count("*"))
        .order_by("kind")
    )
    return {row["kind"]: row["n"] for row in rows}


def queues_in_use(*, queues: Sequence[str]) -> set[str]:
    """Which of ``queues`` hold a pending job."""
    if not queues:
        return set()
    return set(
        sql.jobs()
        .filter(status=Status.PENDING, queue__in=list(queues))
        .values_list("queue", flat=True)
        .distinct()
    )


def unserved_kinds(*, now: datetime | None = None) -> dict[str, int]:
    """Kinds with runnable jobs (due, in a queue that is not paused) that no live worker
    serves (runs the kind and reads the queue), with how many such jobs wait."""
    now = now or timezone.now()
    paused = QueuePause.objects.using(sql.alias()).values("queue")
    runnable = (
        sql.jobs().filter(status=Status.PENDING, visible_at__lte=now).exclude(queue__in=paused)
    )
    pending_by = [
        PendingCount(kind=row["kind"], queue=row["queue"], count=row["n"])
        for row in runnable.values("kind", "queue").annotate(n=Count("*")).order_by("kind")
    ]
    _, live = _workers(now)
    unserved = set(_unserved(pending_by, live))
    counts: dict[str, int] = {}
    for row in pending_by:
        if row.kind in unserved:
            counts[row.kind] = counts.get(row.kind, 0) + row.count
    return counts


def served(*, kind: str, queue: str, now: datetime | None = None) -> bool:
    """Whether a live worker serves a job of ``kind`` in ``queue`` (runs the kind and
    reads the queue): the same fact as ``unserved_kinds``, for one job."""
    _, live = _workers(now or timezone.now())
    return not _unserved([PendingCount(kind=kind, queue=queue, count=1)], live)
