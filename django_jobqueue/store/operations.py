"""What operators do to jobs: cancel, requeue and run now, each with its journal entry.

Cold paths, on the ORM: each locks the one row, checks the state allows the action,
and writes the row and its entry in one transaction. The ``*_refusal`` functions say
why a job's state does not allow an action (None when it does): the operations raise
with that message, and the admin uses the same rules to show buttons and to count
what a bulk action will skip.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from django_jobqueue.errors import InvalidTransition, JobNotFound
from django_jobqueue.models import Job, Outcome, Status
from django_jobqueue.states import UNFINISHED
from django_jobqueue.store import jobrow, joins, sql, steering, wakeups

# The states a cancel ends at once (a claimed job is asked to stop instead): one fact for
# cancel, its refusal, the bulk actions' rule and the batch cancel.
CANCELLABLE = (Status.PENDING, Status.WAITING)


def cancel(*, job_id: uuid.UUID | str, actor: str = "") -> Job:
    """Cancel a pending (or waiting) job now, or ask a claimed job's worker to stop it.

    A claimed job settles as ``cancelled`` when its run ends (unless it completed or
    died). Cancelling a cancelled job is a no-op; completed and dead jobs cannot be
    cancelled. A workflow step's dependents follow its cancellation in the same
    transaction, as they follow a death; so do the child workflows it awaits
    (``ctx.step_workflow``): cancelled, each step journalled naming it.
    """
    now = timezone.now()
    with transaction.atomic(using=sql.alias()):
        job = jobrow.locked(job_id)
        if job.status in CANCELLABLE:
            was = job.status
            jobrow.save(job, status=Status.CANCELLED, finished_at=now)
            jobrow.operator_entry(job, Outcome.CANCELLED, actor, f"cancelled while {was}", now)
            wakeups.announce_settled([job.id])
            if job.workflow_id is not None:
                joins.release([job.id], now=now)
        elif job.status == Status.CLAIMED:
            if not job.cancel_requested:
                jobrow.save(job, cancel_requested=True, cancel_actor=actor)
        elif job.status != Status.CANCELLED:
            raise InvalidTransition(cancel_refusal(job), job_id=job.id, status=job.status)
        if job.status == Status.CANCELLED or job.cancel_requested:
            steering.cancel_children(job_ids=[job.id], actor=actor)
    return job


def requeue(*, job_id: uuid.UUID | str, force: bool = False, actor: str = "") -> Job:
    """Return a dead or cancelled job (a completed one with ``force``) to pending, now.

    The failure count is reset and the carry kept.
    """
    return sql.dialect().retrying_deadlocks(
        lambda: requeue_one(job_id, force=force, actor=actor, workflows=None)
    )


def requeue_one(
    job_id: uuid.UUID | str,
    *,
    force: bool,
    actor: str,
    workflows: set[uuid.UUID] | None,
    why: str = "",
) -> Job:
    """``requeue`` of one job, for the operations that requeue as part of their own
    (``requeue_many``, ``retry_dead_steps``, ``rerunning.rerun_from``): with
    ``workflows``, a step's workflow is added there to be recounted by the caller after
    its last requeue (see ``recount_all``), not here; ``why`` ends its journal note
    (``rerun_from``'s discarded steps)."""
    alias = sql.alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = jobrow.locked(job_id)
        refusal = requeue_refusal(job, force=force)
        if refusal:
            raise InvalidTransition(refusal, job_id=job.id, status=job.status)
        previous = job.status
        try:
            with transaction.atomic(using=alias):
                jobrow.save(job, **requeued(now))
        except IntegrityError as exc:
            raise InvalidTransition(
                f"Job {job.id} cannot be requeued: another active job holds its idempotency "
                f"key {job.idempotency_key!r}",
                job_id=job.id,
            ) from exc
        note = f"requeued from {previous}{why}"
        if job.workflow_id is not None:
            job.status = steering.requeue_step(
                job, previous=previous, now=now, actor=actor, recounted=workflows is None
            )
            if workflows is not None:
                workflows.add(job.workflow_id)
            if job.status == Status.WAITING:
                note += " (waiting for its parents)"
        jobrow.operator_entry(job, Outcome.REQUEUED, actor, note, now)
        wakeups.notify(alias, job.queue)
    return job


# Jobs requeued per transaction by ``requeue_many``: a page of row locks, one UPDATE and
# one INSERT of their journal entries.
REQUEUE_BATCH = 500
# What a batch reads of each job: its rule and its entry, never the large columns.
_REQUEUE_READS = ("id", "kind", "queue", "status", "run_count", "workflow_id", "idempotency_key")


def requeue_many(
    *, job_ids: Sequence[uuid.UUID], force: bool = False, actor: str = ""
) -> list[uuid.UUID]:
    """``requeue`` for many jobs, a batch per transaction; the ids requeued (a job whose
    state no longer allows it is left out, as ``requeue`` would refuse it).

    Plain jobs go in one UPDATE and one INSERT of their entries per batch, the same
    entries ``requeue`` writes; workflow steps (their dependents re-armed) and jobs
    with an idempotency key (another active job may hold it: refused alone, not the
    batch) each go through ``requeue`` itself.
    """
    done: list[uuid.UUID] = []
    for start in range(0, len(job_ids), REQUEUE_BATCH):
        page = job_ids[start : start + REQUEUE_BATCH]
        done += sql.dialect().retrying_deadlocks(partial(_requeue_page, page, force, actor))
    return done


def _requeue_page(ids: Sequence[uuid.UUID], force: bool, actor: str) -> list[uuid.UUID]:
    with transaction.atomic(using=sql.alias()):
        return _requeue_batch(ids, force, actor)


def requeued(now: datetime) -> dict[str, Any]:
    """What a requeue writes on a job, one at a time or a batch at once: pending from
    ``now``, its failures, cancel request and result forgotten."""
    return {
        "status": Status.PENDING,
        "visible_at": now,
        "finished_at": None,
        "failure_count": 0,
        "cancel_requested": False,
        "cancel_actor": "",
        "result": None,
    }


def _requeue_batch(ids: Sequence[uuid.UUID], force: bool, actor: str) -> list[uuid.UUID]:
    now = timezone.now()
    rows = sql.jobs().filter(id__in=list(ids)).order_by("id").only(*_REQUEUE_READS)
    locked = sql.dialect().locked(rows, skip_locked=False)
    jobs = [j for j in locked if not requeue_refusal(j, force=force)]
    plain = [j for j in jobs if j.workflow_id is None and j.idempotency_key is None]
    done = [j.id for j in plain]
    sql.jobs().filter(id__in=done).update(**requeued(now))
    sql.journal_entries().bulk_create(
        [jobrow.entry(j, Outcome.REQUEUED, actor, f"requeued from {j.status}", now) for j in plain]
    )
    for queue in sorted({j.queue for j in plain}):
        wakeups.notify(sql.alias(), queue)
    workflows: set[uuid.UUID] = set()
    for job in jobs:
        if job.workflow_id is None and job.idempotency_key is None:
            continue
        try:
            requeue_one(job.id, force=force, actor=actor, workflows=workflows)
        except InvalidTransition:
            continue
        done.append(job.id)
    recount_all(workflows)
    return done


# What a batch of cancels or run-nows reads of each job: its rule and its entry.
_BATCH_READS = (
    "id",
    "kind",
    "queue",
    "status",
    "run_count",
    "workflow_id",
    "cancel_requested",
    "visible_at",
)


def cancel_many(*, job_ids: Sequence[uuid.UUID], actor: str = "") -> list[uuid.UUID]:
    """``cancel`` for many jobs, a batch per transaction; the ids changed (cancelled, or
    claimed and asked to stop), a job whose state no longer allows it left out.

    Plain pending and waiting jobs go in one UPDATE and one INSERT of their entries per
    batch (the entries ``cancel`` writes), claimed ones in one UPDATE of their cancel
    request; each UPDATE repeats the state it acts on, on rows locked first, so a job
    claimed since it was read is asked to stop, never overwritten. Workflow steps (their
    dependents cancelled or released) each go through ``cancel`` itself, after.
    """
    return _many(job_ids, partial(_cancel_batch, actor=actor), partial(cancel, actor=actor))


def run_now_many(*, job_ids: Sequence[uuid.UUID], actor: str = "") -> list[uuid.UUID]:
    """``run_now`` for many jobs: one UPDATE and one INSERT of their entries per batch."""
    return _many(job_ids, partial(_run_now_batch, actor=actor), partial(run_now, actor=actor))


# A batch's own changes, and the workflow steps it leaves to the one-job operation.
Batch = tuple[list[uuid.UUID], list[uuid.UUID]]


def _many(
    job_ids: Sequence[uuid.UUID],
    batch: Callable[[Sequence[uuid.UUID]], Batch],
    one: Callable[..., Job],
) -> list[uuid.UUID]:
    """Runs ``batch`` on each page of ids in a transaction of its own (retried on a
    deadlock); the workflow steps it hands back go one at a time through ``one``."""
    done: list[uuid.UUID] = []
    for start in range(0, len(job_ids), REQUEUE_BATCH):
        page = job_ids[start : start + REQUEUE_BATCH]

        def in_transaction(page: Sequence[uuid.UUID] = page) -> Batch:
            with transaction.atomic(using=sql.alias()):
                return batch(page)

        changed, steps = sql.dialect().retrying_deadlocks(in_transaction)
        done += changed
        for job_id in steps:
            try:
                one(job_id=job_id)
            except (InvalidTransition, JobNotFound):
                continue
            done.append(job_id)
    return done


def _locked_page(ids: Sequence[uuid.UUID]) -> list[Job]:
    rows = sql.jobs().filter(id__in=list(ids)).order_by("id").only(*_BATCH_READS)
    return list(sql.dialect().locked(rows, skip_locked=False))


def _cancel_batch(ids: Sequence[uuid.UUID], *, actor: str) -> Batch:
    now = timezone.now()
    jobs = [j for j in _locked_page(ids) if cancel_refusal(j) is None]
    steps = [j.id for j in jobs if j.workflow_id is not None and j.status != Status.CLAIMED]
    idle = [j for j in jobs if j.status != Status.CLAIMED and j.workflow_id is None]
    claimed = [j.id for j in jobs if j.status == Status.CLAIMED]
    sql.jobs().filter(id__in=[j.id for j in idle], status__in=CANCELLABLE).update(
        status=Status.CANCELLED, finished_at=now
    )
    sql.journal_entries().bulk_create(
        [
            jobrow.entry(j, Outcome.CANCELLED, actor, f"cancelled while {j.status}", now)
            for j in idle
        ]
    )
    wakeups.announce_settled([j.id for j in idle])
    sql.jobs().filter(id__in=claimed, status=Status.CLAIMED, cancel_requested=False).update(
        cancel_requested=True, cancel_actor=actor
    )
    steering.cancel_children(job_ids=[j.id for j in idle] + claimed, actor=actor)
    return [j.id for j in idle] + claimed, steps


def _run_now_batch(ids: Sequence[uuid.UUID], *, actor: str) -> Batch:
    now = timezone.now()
    jobs = [j for j in _locked_page(ids) if run_now_refusal(j, now=now) is None]
    sql.jobs().filter(
        id__in=[j.id for j in jobs], status=Status.PENDING, visible_at__gt=now
    ).update(visible_at=now)
    sql.journal_entries().bulk_create(
        [
            jobrow.entry(
                j,
                Outcome.RUN_NOW,
                actor,
                f"run now (was scheduled for {j.visible_at.isoformat()})",
                now,
            )
            for j in jobs
        ]
    )
    for queue in sorted({j.queue for j in jobs}):
        wakeups.notify(sql.alias(), queue)
    return [j.id for j in jobs], []


def run_now(*, job_id: uuid.UUID | str, actor: str = "") -> Job:
    """Make a pending job scheduled for later (delay, backoff, pause) runnable now."""
    alias = sql.alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = jobrow.locked(job_id)
        refusal = run_now_refusal(job, now=now)
        if refusal:
            raise InvalidTransition(refusal, job_id=job.id, status=job.status)
        was = job.visible_at
        jobrow.save(job, visible_at=now)
        jobrow.operator_entry(
            job, Outcome.RUN_NOW, actor, f"run now (was scheduled for {was.isoformat()})", now
        )
        wakeups.notify(alias, job.queue)
    return job


def retry_dead_steps(*, workflow_id: uuid.UUID | str, actor: str = "") -> list[uuid.UUID]:
    """Requeue every dead step of a workflow (each re-arming the steps its death
    cancelled); the ids requeued. With no dead step it writes nothing: no recount
    racing the settlements of the workflow's open steps for nothing."""
    wf = steering.workflow_row(workflow_id)
    dead = list(
        sql.jobs()
        .filter(workflow_id=wf.id, status=Status.DEAD)
        .order_by("id")
        .values_list("id", flat=True)
    )
    if not dead:
        return []

    def retry() -> list[uuid.UUID]:
        with transaction.atomic(using=sql.alias()):
            for job_id in dead:
                requeue_one(job_id, force=False, actor=actor, workflows={wf.id})
            recount_all({wf.id})
        return dead

    return sql.dialect().retrying_deadlocks(retry)


def recount_all(workflows: set[uuid.UUID]) -> None:
    """Recount the workflows of steps requeued in this transaction, last: a workflow's
    row is locked after every job row, as a settlement locks them (the re-arm of a
    second dead step must not wait for a child while holding the workflow's row that
    the child's other settling parent waits for: a deadlock)."""
    for workflow_id in sorted(workflows):
        steering.recount(workflow_id)


def cancel_refusal(job: Job) -> str | None:
    """Why ``job`` cannot be cancelled now (a claimed job already asked to stop cannot be
    asked again), or None."""
    if job.status in CANCELLABLE:
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


def acts_on(action: str, *, force: bool = False, now: datetime) -> Q:
    """The jobs ``action`` (cancel, terminate, requeue, run_now, delete) may change, as a filter:
    the ``*_refusal`` rules above in the database's terms, so that an operator acting on
    a whole filter's jobs is told how many match without reading them (a test holds the
    two forms to agree)."""
    if action == "cancel":
        return Q(status__in=CANCELLABLE) | Q(status=Status.CLAIMED, cancel_requested=False)
    if action == "terminate":
        return Q(status__in=[*CANCELLABLE, Status.CLAIMED])
    if action == "requeue":
        finished = Q(status__in=[Status.DEAD, Status.CANCELLED])
        return finished | Q(status=Status.COMPLETED, workflow__isnull=True) if force else finished
    if action == "run_now":
        return Q(status=Status.PENDING, visible_at__gt=now)
    if action == "delete":
        return ~Q(status__in=UNFINISHED)
    raise ValueError(
        f"No operator action {action!r}: cancel, terminate, requeue, run_now or delete"
    )
