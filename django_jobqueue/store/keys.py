"""Reads by key (issue 23): one key's jobs per kind, and a kind's busiest keys, for the
operators (``jobqueue stats --key``, the dashboard). Served by the key indexes
(``jobqueue_job_key``, and ``jobqueue_job_key_claim`` for the pending)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min, Q, QuerySet

from django_jobqueue.models import Job, Status
from django_jobqueue.store import sql


@dataclass(frozen=True)
class KeyLoad:
    """One key's jobs of one kind: pending, claimed (in flight), and when its oldest
    pending job was enqueued (None: none pending)."""

    kind: str
    key: str
    pending: int
    in_flight: int
    oldest: datetime | None


def _loads(jobs: QuerySet[Job]) -> list[KeyLoad]:
    rows = (
        jobs.values("kind", "key")
        .annotate(
            pending=Count("id", filter=Q(status=Status.PENDING)),
            in_flight=Count("id", filter=Q(status=Status.CLAIMED)),
            oldest=Min("created_at", filter=Q(status=Status.PENDING)),
        )
        .order_by("kind", "key")
    )
    return [
        KeyLoad(r["kind"], r["key"] or "", r["pending"], r["in_flight"], r["oldest"]) for r in rows
    ]


def key_loads(*, key: str) -> list[KeyLoad]:
    """``key``'s pending and claimed jobs, by kind."""
    return _loads(sql.jobs().filter(key=key, status__in=[Status.PENDING, Status.CLAIMED]))


def busiest_keys(*, kinds: list[str], top: int = 5) -> dict[str, list[KeyLoad]]:
    """Each of ``kinds``' ``top`` keys by jobs in flight, then pending."""
    active = sql.jobs().filter(
        kind__in=kinds, key__isnull=False, status__in=[Status.PENDING, Status.CLAIMED]
    )
    found: dict[str, list[KeyLoad]] = {}
    for load in _loads(active):
        found.setdefault(load.kind, []).append(load)
    return {
        kind: sorted(loads, key=lambda k: (-k.in_flight, -k.pending, k.key))[:top]
        for kind, loads in found.items()
    }


__all__ = ["KeyLoad", "busiest_keys", "key_loads"]
