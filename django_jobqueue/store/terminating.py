"""Terminate: stop a job now, not at its next cooperative check.

A pending (or waiting) job is cancelled at once, as ``cancel`` does. A claimed one is
asked to stop in the same write a cancel request makes (``cancel_requested``, the
actor) plus a ``TerminateRequest`` naming its run: the worker that holds it sees the
request within a second (its cancel checks), stops the run by the strongest means its
pool has, and settles it ``cancelled`` with a note naming the operator and the means.
Because the cancel request is set too, a run that ends before its worker looks ends
cancelled all the same, and a worker that died leaves the job to a stale recovery that
ends it cancelled.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from django.db import transaction
from django.utils import timezone

from django_jobqueue.errors import InvalidTransition, JobNotFound
from django_jobqueue.models import Job, Status, TerminateRequest
from django_jobqueue.store import jobrow, operations, sql


def terminate(*, job_id: uuid.UUID | str, actor: str = "") -> Job:
    """Stop a job now: cancel a pending or waiting one, tell a claimed one's worker to
    stop its run (its child killed, its coroutine cancelled, or its thread abandoned)
    and settle it ``cancelled``. Terminating a cancelled job is a no-op; completed and
    dead jobs cannot be terminated (``InvalidTransition``)."""
    with transaction.atomic(using=sql.alias()):
        job = jobrow.locked(job_id)
        if job.status == Status.CANCELLED:
            return job
        if job.status != Status.CLAIMED:
            refusal = terminate_refusal(job)
            if refusal is not None:
                raise InvalidTransition(refusal, job_id=job.id, status=job.status)
            return operations.cancel(job_id=job.id, actor=actor)
        if not job.cancel_requested:
            jobrow.save(job, cancel_requested=True, cancel_actor=actor)
        TerminateRequest.objects.using(sql.alias()).update_or_create(
            job_id=job.id,
            defaults={"run_no": job.run_count, "actor": actor, "requested_at": timezone.now()},
        )
    return job


def terminate_many(*, job_ids: Sequence[uuid.UUID], actor: str = "") -> list[uuid.UUID]:
    """``terminate`` for many jobs, one at a time (an operator's selection, a thousand at
    most); the ids changed, a job whose state no longer allows it left out."""
    done = []
    for job_id in job_ids:
        try:
            terminate(job_id=job_id, actor=actor)
        except (InvalidTransition, JobNotFound):
            continue
        done.append(job_id)
    return done


def terminate_refusal(job: Job) -> str | None:
    """Why ``job`` cannot be terminated (only pending, waiting and claimed jobs can), or
    None. A second terminate of a claimed job renews its request."""
    if job.status in (*operations.CANCELLABLE, Status.CLAIMED):
        return None
    return (
        f"Job {job.id} is {job.status}; only pending or claimed jobs can be terminated "
        "(and waiting workflow steps)"
    )


def terminate_requested(*, job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, tuple[int, str]]:
    """The terminate requests among these jobs: the run each is for, and who asked."""
    ids = list(job_ids)
    if not ids:
        return {}
    rows = TerminateRequest.objects.using(sql.alias()).filter(job_id__in=ids)
    return {
        job_id: (run_no, actor)
        for job_id, run_no, actor in rows.values_list("job_id", "run_no", "actor")
    }
