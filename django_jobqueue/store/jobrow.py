"""One job's row as an operator's action writes it: locked, changed, and journalled
with the operator named. Shared by the operations that act on one job at a time
(``operations``: cancel, requeue, run now; ``terminating``; ``rerunning``), each of which
calls these inside its own transaction, and by the batch actions for their entries.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django_jobqueue.errors import JobNotFound
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.store import sql
from django_jobqueue.store.reading import as_uuid


def locked(job_id: uuid.UUID | str) -> Job:
    """The job, its row locked until the caller's transaction ends (waiting for a lock
    another holds, never skipping it); ``JobNotFound`` when there is no such job."""
    try:
        return sql.dialect().locked(sql.jobs().filter(id=as_uuid(job_id)), skip_locked=False).get()
    except Job.DoesNotExist:
        raise JobNotFound(f"No job with id {job_id}", job_id=job_id) from None


def save(job: Job, **changes: object) -> None:
    """Set ``changes`` on ``job`` and write those fields alone."""
    for name, value in changes.items():
        setattr(job, name, value)
    job.save(using=sql.alias(), update_fields=list(changes))


def operator_entry(job: Job, outcome: str, actor: str, note: str, now: datetime) -> None:
    """Write the operator's journal entry for ``job`` (see ``entry``)."""
    entry(job, outcome, actor, note, now).save(using=sql.alias(), force_insert=True)


def entry(job: Job, outcome: str, actor: str, note: str, now: datetime) -> JournalEntry:
    """An operator's journal entry for ``job`` (not yet written): its note ends naming
    the operator, who is kept in ``actor`` too."""
    return JournalEntry(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count,
        outcome=outcome,
        recorded_at=now,
        note=f"{note} by {actor}" if actor else note,
        actor=actor,
    )
