"""What operators do to jobs: cancel, requeue and run now, each with its journal entry.

Cold paths, on the ORM: each locks the one row, checks the state allows the action,
and writes the row and its entry in one transaction. The ``*_refusal`` functions say
why a job's state does not allow an action (None when it does): the operations raise
with that message, and the admin uses the same rules to show buttons and to count
what a bulk action will skip.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from django_jobqueue.errors import InvalidTransition, JobNotFound
from django_jobqueue.models import Job, Outcome, Status
from django_jobqueue.states import UNFINISHED
from django_jobqueue.store import joins, sql, steering, wakeups
from django_jobqueue.store.reading import as_uuid


def cancel(*, job_id: uuid.UUID | str, actor: str = "") -> Job:
    """Cancel a pending (or waiting) job now, or ask a claimed job's worker to stop it.

    A claimed job settles as ``cancelled`` when its run ends (unless it completed or
    died). Cancelling a cancelled job is a no-op; completed and dead jobs cannot be
    cancelled. A workflow step's dependents follow its cancellation in the same
    transaction, as they follow a death.
    """
    now = timezone.now()
    with transaction.atomic(using=sql.alias()):
        job = _locked(job_id)
        if job.status in (Status.PENDING, Status.WAITING):
            was = job.status
            _save(job, status=Status.CANCELLED, finished_at=now)
            _operator_entry(job, Outcome.CANCELLED, actor, f"cancelled while {was}", now)
            if job.workflow_id is not None:
                joins.release([job.id], now=now)
        elif job.status == Status.CLAIMED:
            if not job.cancel_requested:
                _save(job, cancel_requested=True, cancel_actor=actor)
        elif job.status != Status.CANCELLED:
            raise InvalidTransition(cancel_refusal(job), job_id=job.id, status=job.status)
    return job


def requeue(*, job_id: uuid.UUID | str, force: bool = False, actor: str = "") -> Job:
    """Return a dead or cancelled job (a completed one with ``force``) to pending, now.

    The failure count is reset and the carry kept.
    """
    alias = sql.alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = _locked(job_id)
        refusal = requeue_refusal(job, force=force)
        if refusal:
            raise InvalidTransition(refusal, job_id=job.id, status=job.status)
        previous = job.status
        try:
            with transaction.atomic(using=alias):
                _save(
                    job,
                    status=Status.PENDING,
                    visible_at=now,
                    finished_at=None,
                    failure_count=0,
                    cancel_requested=False,
                    cancel_actor="",
                    result=None,
                )
        except IntegrityError as exc:
            raise InvalidTransition(
                f"Job {job.id} cannot be requeued: another active job holds its idempotency "
                f"key {job.idempotency_key!r}",
                job_id=job.id,
            ) from exc
        note = f"requeued from {previous}"
        if job.workflow_id is not None:
            job.status = steering.requeue_step(job, previous=previous, now=now, actor=actor)
            if job.status == Status.WAITING:
                note += " (waiting for its parents)"
        _operator_entry(job, Outcome.REQUEUED, actor, note, now)
        wakeups.notify(alias, job.queue)
    return job


def run_now(*, job_id: uuid.UUID | str, actor: str = "") -> Job:
    """Make a pending job scheduled for later (delay, backoff, pause) runnable now."""
    alias = sql.alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = _locked(job_id)
        refusal = run_now_refusal(job, now=now)
        if refusal:
            raise InvalidTransition(refusal, job_id=job.id, status=job.status)
        was = job.visible_at
        _save(job, visible_at=now)
        _operator_entry(
            job, Outcome.RUN_NOW, actor, f"run now (was scheduled for {was.isoformat()})", now
        )
        wakeups.notify(alias, job.queue)
    return job


def retry_dead_steps(*, workflow_id: uuid.UUID | str, actor: str = "") -> list[uuid.UUID]:
    """Requeue every dead step of a workflow (each re-arming the steps its death
    cancelled); the ids requeued."""
    wf = steering.workflow_row(workflow_id)
    dead = list(
        sql.jobs()
        .filter(workflow_id=wf.id, status=Status.DEAD)
        .order_by("id")
        .values_list("id", flat=True)
    )
    with transaction.atomic(using=sql.alias()):
        for job_id in dead:
            requeue(job_id=job_id, actor=actor)
    return dead


def cancel_refusal(job: Job) -> str | None:
    """Why ``job`` cannot be cancelled now (a claimed job already asked to stop cannot be
    asked again), or None."""
    if job.status in (Status.PENDING, Status.WAITING):
        return None
    if job.status == Status.CLAIMED:
        if job.cancel_requested:
            return f"Job {job.id} is claimed and has already been asked to stop"
        return None
    return (
        f"Job {job.id} is {job.status}; only pending or claimed jobs can be cancelled "
        "(and waiting workflow steps)"
    )


def requeue_refusal(job: Job, *, force: bool = False) -> str | None:
    """Why ``job`` cannot be requeued (with or without ``force``), or None."""
    if job.status in UNFINISHED:
        return f"Job {job.id} is {job.status}; only finished jobs can be requeued"
    if job.status == Status.COMPLETED and job.workflow_id is not None:
        # Its dependents counted its completion once; a second one would count twice.
        return f"Job {job.id} is a completed workflow step; it cannot run again"
    if job.status == Status.COMPLETED and not force:
        return f"Job {job.id} completed; requeue it with force to run it again"
    return None


def run_now_refusal(job: Job, *, now: datetime) -> str | None:
    """Why ``job`` cannot be made runnable now (it must be pending and scheduled), or None."""
    if job.status != Status.PENDING:
        return f"Job {job.id} is {job.status}; only a pending job can be run now"
    if job.visible_at <= now:
        return f"Job {job.id} is already runnable"
    return None


def delete_refusal(job: Job) -> str | None:
    """Why ``job`` cannot be deleted (only finished jobs ever are), or None."""
    if job.status in UNFINISHED:
        return f"Job {job.id} is {job.status}; only finished jobs can be deleted"
    return None


def _locked(job_id: uuid.UUID | str) -> Job:
    try:
        return sql.dialect().locked(sql.jobs().filter(id=as_uuid(job_id)), skip_locked=False).get()
    except Job.DoesNotExist:
        raise JobNotFound(f"No job with id {job_id}", job_id=job_id) from None


def _save(job: Job, **changes: object) -> None:
    for name, value in changes.items():
        setattr(job, name, value)
    job.save(using=sql.alias(), update_fields=list(changes))


def _operator_entry(job: Job, outcome: str, actor: str, note: str, now: datetime) -> None:
    sql.journal_entries().create(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count,
        outcome=outcome,
        recorded_at=now,
        note=f"{note} by {actor}" if actor else note,
        actor=actor,
    )
