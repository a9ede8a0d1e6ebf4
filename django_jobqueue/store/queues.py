"""Pausing queues: workers claim nothing from a paused queue until it is resumed.

A pause is a row of ``QueuePause``; the claim statement reads that small table inside
itself (the dialect's claim), so pausing costs a claim no round trip. Jobs
already claimed run to their end, and enqueueing into a paused queue goes on as
usual. Both changes NOTIFY the queue on PostgreSQL, so idle workers take their next
turn at once rather than at their poll ceiling.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from django_jobqueue import validation
from django_jobqueue.models import QueuePause
from django_jobqueue.store import sql, wakeups

QUEUE_NAME_MAX = 100


def pause_queue(*, queue: str, actor: str = "") -> bool:
    """Pause ``queue``; True if it was running until now (False: already paused)."""
    name = _checked(queue)
    alias = sql.alias()
    with transaction.atomic(using=alias):
        _, created = QueuePause.objects.using(alias).get_or_create(
            queue=name, defaults={"paused_at": timezone.now(), "paused_by": actor}
        )
        wakeups.notify(alias, name)
    return created


def resume_queue(*, queue: str) -> bool:
    """Resume ``queue``; True if it was paused until now."""
    name = _checked(queue)
    alias = sql.alias()
    with transaction.atomic(using=alias):
        deleted, _ = QueuePause.objects.using(alias).filter(queue=name).delete()
        wakeups.notify(alias, name)
    return deleted > 0


def paused_queues() -> list[QueuePause]:
    """Every paused queue, by name."""
    return list(QueuePause.objects.using(sql.alias()).order_by("queue"))


def _checked(queue: str) -> str:
    name = queue.strip() if isinstance(queue, str) else queue
    return validation.bounded_text(name, name="queue", error=ValueError, max_length=QUEUE_NAME_MAX)
