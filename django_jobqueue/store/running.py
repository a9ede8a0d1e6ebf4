"""Unique while running (issue 23): an enqueue that merges into a *running* sibling.

``.using(dedup_key=..., while_running="drop")`` declares that a job of the same kind and
dedup key already running covers the new one: when no pending sibling takes it (the
ordinary merge, tried first), the new job is dropped into the oldest claimed sibling, as
a ``merged`` journal entry on that job's current run, and nothing else is written. The
running job's row is never locked or changed (its worker's guarded settlement must not
wait on an enqueue's transaction); the entry is kept only if the sibling is still
claimed, for the same run, when it has been written (the check sees a settlement
committed meanwhile: PostgreSQL and MariaDB/MySQL at read committed, Django's default;
SQLite has one writer at a time). A sibling that
settled first gets no entry, and the caller inserts the job as usual.

``while_running="wait"`` (one at a time) needs nothing here: its jobs carry the dedup
key as their key, and the kind's per-key limit of one holds a new job in the claim
while its sibling runs (``dialects.base.keyed``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from django_jobqueue.models import Job, Outcome, Status
from django_jobqueue.store import sql


class _Settled(Exception):
    """The sibling settled while its entry was being written: the entry rolls back."""


def running_siblings(*, kind: str, dedup_key: str) -> Any:
    """The claimed jobs of ``kind`` with ``dedup_key``, oldest first (a scan of the claimed
    rows' index: as many as are in flight)."""
    return (
        sql.jobs()
        .filter(status=Status.CLAIMED, kind=kind, dedup_key=dedup_key)
        .order_by("created_at", "id")
    )


def into_running(
    *,
    kind: str,
    dedup_key: str,
    payload: dict[str, Any],
    idempotency_key: str | None,
    now: datetime,
) -> Job | None:
    """Drop an incoming job into the oldest running sibling that may take it (one that
    answers to no other idempotency key): that job, or None when none is running."""
    alias = sql.alias()
    sibling: Job
    for sibling in running_siblings(kind=kind, dedup_key=dedup_key):
        if idempotency_key is not None and sibling.idempotency_key not in (None, idempotency_key):
            continue  # it answers to another key
        try:
            with transaction.atomic(using=alias):
                sql.journal_entries().create(
                    job_id=sibling.id,
                    kind=kind,
                    run_no=sibling.run_count,
                    outcome=Outcome.MERGED,
                    recorded_at=now,
                    note="merge: into the running job (while_running=drop)",
                    attachment={"incoming": payload},
                )
                still = sql.jobs().filter(
                    id=sibling.id, status=Status.CLAIMED, run_count=sibling.run_count
                )
                if not still.exists():
                    raise _Settled
        except _Settled:
            continue
        return sibling
    return None


__all__ = ["into_running", "running_siblings"]
