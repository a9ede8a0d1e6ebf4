"""Deleting finished jobs and their journal, in short batches.

Journal entries are deleted only through ``monitoring.delete_journal``. Their runs
stay in the metrics' counters: the run tally counted them when they were settled. A
job's durable-step records and stream items go with it, by the ORM's cascade of the
job's delete (``_delete``). When the journal is partitioned (PostgreSQL), retention's
cleanup leaves the journal alone (``journal=False``): its entries go with their
partition, dropped whole (``store.partitions``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models.deletion import Collector

from django_jobqueue.errors import InvalidFilter
from django_jobqueue.models import TERMINAL, Job, JournalEntry
from django_jobqueue.store import sql
from django_jobqueue.store.monitoring import delete_journal
from django_jobqueue.store.reading import as_uuid, names, several


def cleanup(
    *,
    finished_before: datetime,
    kind: str | None = None,
    status: str | Sequence[str] | None = None,
    batch_size: int = 1000,
    dry_run: bool = False,
    journal: bool = True,
) -> int:
    """Delete finished jobs (and their journal, unless not ``journal``: left to go with
    their partitions) in batches, each its own short transaction. Only completed, dead
    and cancelled jobs are ever deleted. Returns the count (with ``dry_run``, the count
    that would be deleted)."""
    if not isinstance(finished_before, datetime):
        raise InvalidFilter(
            f"finished_before must be a datetime, got {finished_before!r}",
            argument="finished_before",
        )
    given = several(status) if status else list(TERMINAL)
    bad = sorted(map(str, set(given) - set(TERMINAL)))
    if bad:
        raise InvalidFilter(
            f"cleanup deletes only finished jobs ({', '.join(TERMINAL)}), not {', '.join(bad)}",
            argument="status",
        )
    statuses = [str(s) for s in given]
    # Workflow steps go with their workflow, once it finished (see cleanup_workflows).
    qs = sql.jobs().filter(
        status__in=statuses, finished_at__lt=finished_before, workflow__isnull=True
    )
    whole = kind is None and set(statuses) == set(TERMINAL)
    if kind:
        qs = qs.filter(kind=names("kind", kind))
    if dry_run:
        steps = cleanup_workflows(finished_before=finished_before, dry_run=True) if whole else 0
        return qs.count() + steps
    alias = sql.alias()
    d = sql.dialect()
    total = 0

    def batch() -> tuple[int, int]:
        with transaction.atomic(using=alias):
            ids = list(
                d.locked(qs.order_by("finished_at"), skip_locked=True).values_list("id", flat=True)[
                    :batch_size
                ]
            )
            return len(ids), _delete(ids, statuses, journal=journal) if ids else 0

    while True:
        found, deleted = d.retrying_deadlocks(batch)
        total += deleted
        if found < batch_size:
            break
    if whole:
        total += cleanup_workflows(
            finished_before=finished_before, batch_size=batch_size, journal=journal
        )
    return total


def cleanup_workflows(
    *,
    finished_before: datetime,
    batch_size: int = 1000,
    dry_run: bool = False,
    journal: bool = True,
) -> int:
    """Delete workflows that finished before ``finished_before`` with their steps (and
    their journal) and edges, a few workflows per short transaction; never a step of a
    running workflow. Returns the steps deleted (with ``dry_run``, that would be)."""
    from django_jobqueue.models import Workflow, WorkflowStatus

    done = (
        Workflow.objects.using(sql.alias())
        .filter(finished_at__lt=finished_before, finished_at__isnull=False)
        .exclude(status=WorkflowStatus.RUNNING)
    )
    if dry_run:
        return sql.jobs().filter(workflow__in=done).count()
    alias = sql.alias()
    d = sql.dialect()
    total = 0

    def batch() -> tuple[int, int]:
        with transaction.atomic(using=alias):
            wfs = list(
                d.locked(done.order_by("finished_at"), skip_locked=True).values_list(
                    "id", flat=True
                )[:10]
            )
            ids = list(sql.jobs().filter(workflow_id__in=wfs).values_list("id", flat=True))
            deleted = 0
            for start in range(0, len(ids), batch_size):
                deleted += _delete(ids[start : start + batch_size], list(TERMINAL), journal=journal)
            Workflow.objects.using(alias).filter(id__in=wfs).delete()
            return len(wfs), deleted

    while True:
        found, deleted = d.retrying_deadlocks(batch)
        total += deleted
        if found < 10:
            return total


def delete_finished(
    *, job_ids: Iterable[uuid.UUID | str], batch_size: int = 1000
) -> list[uuid.UUID]:
    """Delete these jobs (and their journal) where they are finished; active ones stay,
    and so do the steps of a running workflow.

    Returns the ids deleted. Rows are locked first, so a job that a concurrent
    requeue is returning to pending is either deleted before it or left alone.
    """
    ids = [as_uuid(i) for i in job_ids]
    alias = sql.alias()
    d = sql.dialect()
    deleted: list[uuid.UUID] = []
    for start in range(0, len(ids), batch_size):

        def batch(start: int = start) -> list[uuid.UUID]:
            with transaction.atomic(using=alias):
                chunk = (
                    sql.jobs()
                    .filter(id__in=ids[start : start + batch_size], status__in=TERMINAL)
                    .exclude(workflow_id__in=_running_workflows())
                )
                locked = list(d.locked(chunk, skip_locked=False).values_list("id", flat=True))
                _delete(locked, list(TERMINAL))
            return locked

        deleted += d.retrying_deadlocks(batch)
    return deleted


def prune_merge_locks(*, batch_size: int = 1000) -> int:
    """Delete the merge-lock rows no enqueue holds now; returns how many.

    A row is needed only while an enqueue's transaction holds it (two enqueues of one
    key take turns on it; the merge itself reads the jobs table), so one per key ever
    merged would otherwise stay forever. A held row is skipped (``SKIP LOCKED``); an
    enqueue that meets a row this deletes waits for the delete, then makes its row
    again and takes its turn as before. On SQLite the database's one write lock already
    keeps this apart from any enqueue.
    """
    from django_jobqueue.models import MergeLock

    alias = sql.alias()
    d = sql.dialect()
    rows = MergeLock.objects.using(alias).order_by()
    total = 0

    def batch() -> int:
        with transaction.atomic(using=alias):
            names = list(
                d.locked(rows, skip_locked=True).values_list("name", flat=True)[:batch_size]
            )
            if names:
                rows.filter(name__in=names).delete()
            return len(names)

    while True:
        found = d.retrying_deadlocks(batch)
        total += found
        if found < batch_size:
            return total


def _running_workflows() -> Any:
    from django_jobqueue.models import Workflow, WorkflowStatus

    running = Workflow.objects.using(sql.alias()).filter(status=WorkflowStatus.RUNNING)
    return running.values("id")


class _JournalLeft(Collector):
    """The ORM's delete of jobs, but for their journal entries: those go with their
    partitions (the entries of a job whose row is gone are never read by job again)."""

    def related_objects(self, related_model: Any, related_fields: Any, objs: Any) -> Any:
        found = super().related_objects(related_model, related_fields, objs)
        return found.none() if related_model is JournalEntry else found


def _delete(ids: Sequence[uuid.UUID], statuses: Sequence[str], *, journal: bool = True) -> int:
    """Delete the jobs of ``ids`` still in ``statuses``, journal first (unless not
    ``journal``), its runs tallied (in the caller's transaction, with the rows locked);
    returns the jobs deleted."""
    if not ids:
        return 0
    jobs = sql.jobs().filter(id__in=ids, status__in=statuses)
    if not journal:
        collector = _JournalLeft(using=sql.alias(), origin=jobs)
        collector.collect(jobs)
        return collector.delete()[1].get(Job._meta.label, 0)
    delete_journal(job_ids=ids)
    # The ORM's delete, so that a project's own rows that point at a job cascade (or
    # protect it) as the project declared; the journal it would cascade to is gone.
    _, per_model = jobs.delete()
    return per_model.get(Job._meta.label, 0)
