"""Worker heartbeats: who is running, serving what, and since when."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.utils import timezone

from django_jobqueue.models import WorkerHeartbeat
from django_jobqueue.store import sql

# A worker not seen for this long (stopped or gone) is forgotten when the next one starts.
WORKER_PRUNE_AFTER = timedelta(days=1)


def register_worker(
    *,
    worker_id: str,
    host: str,
    pid: int,
    queues: Sequence[str],
    kinds: Sequence[str],
    concurrency: int,
) -> None:
    now = timezone.now()
    workers = WorkerHeartbeat.objects.using(sql.alias())
    workers.filter(last_seen_at__lt=now - WORKER_PRUNE_AFTER).delete()
    workers.update_or_create(
        id=worker_id,
        defaults={
            "host": host,
            "pid": pid,
            "queues": list(queues),
            "kinds": list(kinds),
            "concurrency": concurrency,
            "started_at": now,
            "last_seen_at": now,
            "jobs_done": 0,
            "stopped_at": None,
        },
    )


def beat(*, worker_id: str, jobs_done: int, stopped: bool = False) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {"last_seen_at": now, "jobs_done": jobs_done}
    if stopped:
        fields["stopped_at"] = now
    WorkerHeartbeat.objects.using(sql.alias()).filter(id=worker_id).update(**fields)


def mark_gone(*, pid: int, host: str) -> int:
    """Mark the worker process ``pid`` on ``host`` stopped now, as its supervisor saw it
    die: the registry shows it gone at once, not when its heartbeat goes stale. Returns
    how many rows it marked (its rows still listed as running)."""
    now = timezone.now()
    rows = WorkerHeartbeat.objects.using(sql.alias()).filter(
        host=host, pid=pid, stopped_at__isnull=True
    )
    return int(rows.update(stopped_at=now, last_seen_at=now))
