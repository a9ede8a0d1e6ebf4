"""What operators do about jobs whose durable steps no longer match the code: find the
jobs a replay found diverged (``divergent``), and re-run a job from one of its steps
(``rerun_from``): the records from that step on discarded and the job made pending
again, in one transaction under the job's row lock, journalled with the operator.

Why re-run rather than fork (DBOS's ``fork_workflow`` copies the records before the step
into a new workflow): the job keeps its id, its journal, its idempotency key, its place
in a workflow and its callers' handles, and the records kept are not copied (one
DELETE of the rest). A run in flight is refused rather than released: its worker holds
the job's claim, and stopping it is ``cancel``'s business; once the job is pending, the
guard of every write a run makes (status claimed, ``claimed_by``, run number) refuses
whatever a stale run of the old attempt still tries to record, as after a recovery.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery
from django.utils import timezone

from django_jobqueue.errors import InvalidStep, InvalidTransition
from django_jobqueue.models import Job, JournalEntry, Outcome, Status, StepRecord
from django_jobqueue.store import jobrow, operations, sql, steering, streams, wakeups
from django_jobqueue.store.children import CHILD
from django_jobqueue.store.durable import RECORDS

# The records a step name is looked up among (a patch decision is no step to re-run; a
# child workflow's step is, by its "child" record).
_STEPS = ("step", "sleep", "wait", CHILD)
_UNPARKED = {"parked": "", "wake_at": None, "wait_name": None, "wait_key": None}


def rerun_from(*, job_id: uuid.UUID | str, step: str, actor: str = "") -> Job:
    """Discard ``job_id``'s records from its step ``step`` on and make it pending now
    (its steps before ``step`` are kept and replayed, not run again); returns the job.
    Refused (``InvalidTransition``) while a run holds the job, or while it waits for
    its workflow parents; ``InvalidStep`` when it recorded no step of that name;
    ``JobNotFound`` when there is no such job. Nothing is written when refused."""
    if not isinstance(step, str) or not step:
        raise InvalidStep(f"rerun_from() takes a step name, got {step!r:.80}", argument="step")
    return sql.dialect().retrying_deadlocks(lambda: _rerun(job_id, step, actor))


def _rerun(job_id: uuid.UUID | str, step: str, actor: str) -> Job:
    with transaction.atomic(using=sql.alias()):
        job = jobrow.locked(job_id)
        refusal = rerun_refusal(job)
        if refusal:
            raise InvalidTransition(refusal, job_id=job.id, status=job.status)
        first, names = _first_record(job, step)
        # A child workflow the job still waits for is from that step on: cancelled, as
        # the re-run enqueues its own when it gets there.
        steering.cancel_children(job_ids=[job.id], actor=actor)
        rows = StepRecord.objects.using(sql.alias()).filter(job_id=job.id, id__gte=first)
        discarded = rows.delete()[0]
        # The stream is cut back to the first item the discarded steps wrote: the re-run
        # writes it and what followed again, in order.
        items = streams.cut(job_id=job.id, steps=names)
        detail = f"({discarded} record(s) discarded: {', '.join(map(repr, names))}"
        detail += f"; {items} stream item(s))" if items else ")"
        if job.status == Status.PENDING:
            now = timezone.now()
            jobrow.save(job, visible_at=now, delivered=None, **_UNPARKED)
            note = f"re-run from step {step!r} while pending {detail}"
            jobrow.operator_entry(job, Outcome.REQUEUED, actor, note, now)
            wakeups.notify(sql.alias(), job.queue)
            return job
        sql.jobs().filter(id=job.id).update(delivered=None, **_UNPARKED)
        why = f"; re-run from step {step!r} {detail}"
        return operations.requeue_one(job.id, force=True, actor=actor, workflows=None, why=why)


def rerun_refusal(job: Job) -> str | None:
    """Why ``job`` cannot be re-run from a step now, or None."""
    if job.status == Status.CLAIMED:
        return (
            f"Job {job.id} is running (claimed by {job.claimed_by!r}, run {job.run_count}): "
            "a run in flight cannot be re-run from a step; cancel it or let it end first"
        )
    if job.status == Status.WAITING:
        return f"Job {job.id} is waiting for its workflow parents; it has not run yet"
    if job.status == Status.PENDING:
        return None
    return operations.requeue_refusal(job, force=True)


def _first_record(job: Job, step: str) -> tuple[int, list[str]]:
    """The id of the job's first record of step ``step``, and the names from it on."""
    d = sql.dialect()
    rows = d.run(
        f"SELECT id, record FROM {RECORDS} WHERE job_id = %s ORDER BY id", [d.job_id(job.id)]
    )
    records: list[tuple[int, Any]] = [(rid, sql.loads(text)) for rid, text in rows]
    steps = [(rid, r) for rid, r in records if isinstance(r, dict) and r.get("kind") in _STEPS]
    for i, (rid, record) in enumerate(steps):
        if record.get("name") == step:
            return rid, [str(r.get("name")) for _, r in steps[i:]]
    known = [r.get("name") for _, r in steps]
    raise InvalidStep(
        f"Job {job.id} recorded no step named {step!r}; its recorded steps are {known} "
        "(a step that has not recorded yet runs on the next retry: requeue the job)",
        argument="step",
        job_id=job.id,
    )


# How a run that died of a divergence begins its journal note (``error_text``'s class).
DIVERGED_NOTE = "StepDivergence: "


def divergent(*, limit: int = 100) -> list[tuple[Job, str]]:
    """The dead jobs whose last run found their records diverged from the code
    (``StepDivergence``), each with that run's note, newest first, at most ``limit``:
    what can be known without
    running task code, which alone says what its steps are. A parked or pending job
    that will diverge is found when it next runs, and settles dead here."""
    died = JournalEntry.objects.using(sql.alias()).filter(
        job_id=OuterRef("id"),
        run_no=OuterRef("run_count"),
        outcome=Outcome.DEAD,
        note__startswith=DIVERGED_NOTE,
    )
    rows = (
        sql.jobs()
        .filter(status=Status.DEAD)
        .filter(Exists(died))
        .annotate(divergence=Subquery(died.values("note")[:1]))
        .order_by("-finished_at", "-id")
    )
    return [(job, job.divergence) for job in rows[:limit]]
