"""What operators do to workflows: cancel one (and the child workflows its steps await,
``cancel_children``), and the re-arming
of a requeued step's dependents. Cold paths, on the ORM, each in one transaction that
locks job rows before the workflow's row (the order a settlement's release takes).

Re-arming recounts a dependent's counters from its parents' statuses (a scan of its
parents, fine on an operator's path): a ``completed`` join that a death cancelled waits
again if none of its parents is still dead; a ``finished`` join still waiting counts
the requeued parent as open again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import transaction
from django.db.models import Case, Value, When
from django.utils import timezone

from django_jobqueue.errors import InvalidTransition, WorkflowNotFound
from django_jobqueue.models import (
    TERMINAL,
    Job,
    JournalEntry,
    Outcome,
    Status,
    StepRecord,
    Workflow,
)
from django_jobqueue.rules.joins import outcome
from django_jobqueue.states import UNFINISHED, JoinWhen, WorkflowStatus
from django_jobqueue.store import children, joins, sql, wakeups


def workflow_row(workflow_id: uuid.UUID | str) -> Workflow:
    from django_jobqueue.store.reading import as_uuid

    try:
        key = as_uuid(workflow_id)
    except Exception:
        key = None
    found = None if key is None else joins.workflows().filter(id=key).first()
    if found is None:
        raise WorkflowNotFound(f"No workflow with id {workflow_id}", workflow_id=workflow_id)
    return found


def cancel_workflow(
    *, workflow_id: uuid.UUID | str, actor: str = "", because: str = ""
) -> Workflow:
    """Cancel every unfinished step of a workflow: waiting and pending ones now (each
    journalled, ``because`` added to the note), claimed ones when their runs end (as
    ``cancel`` asks them); the workflow ends ``cancelled`` once none is open. Cancelling
    a cancelled workflow is a no-op; a finished one cannot be cancelled."""
    return sql.dialect().retrying_deadlocks(lambda: _cancel(workflow_id, actor, because))


def _cancel(workflow_id: uuid.UUID | str, actor: str, because: str = "") -> Workflow:
    now = timezone.now()
    with transaction.atomic(using=sql.alias()):
        wf = workflow_row(workflow_id)
        if wf.status == WorkflowStatus.CANCELLED or wf.cancel_requested:
            return wf
        if wf.status != WorkflowStatus.RUNNING:
            raise InvalidTransition(
                f"Workflow {wf.id} is {wf.status}; only a running workflow can be cancelled",
                workflow_id=wf.id,
                status=wf.status,
            )
        # Every unfinished step locked first, the claimed ones before the others (as a
        # settlement locks its own rows before their children: it never holds a child
        # this waits for while it waits for a step this holds), each in id order, and
        # sorted by its status as locked: a settlement committing meanwhile may have
        # released (or a worker's turn claimed) a step this transaction's earlier reads
        # saw waiting.
        unfinished = sql.dialect().locked(
            sql.jobs().filter(workflow_id=wf.id, status__in=UNFINISHED), skip_locked=False
        )
        claimed_first = Case(When(status=Status.CLAIMED, then=Value(0)), default=Value(1))
        ordered = unfinished.order_by(claimed_first, "id")
        rows = list(ordered.values_list("id", "kind", "run_count", "status"))
        claimed = [i for i, _, _, status in rows if status == Status.CLAIMED]
        sql.jobs().filter(id__in=claimed, cancel_requested=False).update(
            cancel_requested=True, cancel_actor=actor
        )
        open_ = [(i, kind, runs) for i, kind, runs, status in rows if status != Status.CLAIMED]
        ids = [i for i, _, _ in open_]
        sql.jobs().filter(id__in=ids).update(
            status=Status.CANCELLED, finished_at=now, cancel_actor=actor
        )
        wakeups.announce_settled(ids)
        note = f"cancelled with its workflow by {actor}" if actor else "cancelled with its workflow"
        if because:
            note = f"{note} ({because})"
        sql.journal_entries().bulk_create(
            JournalEntry(
                job_id=i,
                kind=kind,
                run_no=runs,
                outcome=Outcome.CANCELLED,
                recorded_at=now,
                note=note,
                actor=actor,
            )
            for i, kind, runs in open_
        )
        joins.workflows().filter(id=wf.id).update(cancel_requested=True, cancel_actor=actor)
        joins.close(wf.id, closed=len(ids), dead=0, now=now)
        cancel_children(job_ids=[*claimed, *ids], actor=actor)
    return workflow_row(wf.id)


def parent_counts(job_id: uuid.UUID) -> tuple[int, int]:
    """A step's parents not yet finished, and those dead or cancelled."""
    statuses = list(
        sql.jobs().filter(child_edges__child_id=job_id).values_list("status", flat=True)
    )
    open_ = sum(1 for s in statuses if s not in TERMINAL)
    dead = sum(1 for s in statuses if s in (Status.DEAD, Status.CANCELLED))
    return open_, dead


def requeue_step(
    job: Job, *, previous: str, now: datetime, actor: str, recounted: bool = True
) -> str:
    """A step an operator requeues: pending if its parents allow it, else waiting on
    them again (the status it takes); then its dependents are re-armed and (unless not
    ``recounted``: the caller recounts once it has requeued all it will) the workflow
    runs again."""
    open_, dead = parent_counts(job.id)
    status = Status.PENDING
    if open_ or (job.join_when == JoinWhen.FAILED and not dead):
        status = Status.WAITING
    if job.join_when == JoinWhen.COMPLETED and dead:
        raise InvalidTransition(
            f"Step {job.step_name!r} ({job.id}) waits for parents that did not complete: "
            "requeue its dead parent instead, which re-arms this step",
            job_id=job.id,
            status=job.status,
        )
    sql.jobs().filter(id=job.id).update(status=status, parents_open=open_, parents_dead=dead)
    rearm([job.id], now=now, actor=actor, because=job)
    if recounted:
        recount(job.workflow_id)
    return status


def rearm(parents: Sequence[uuid.UUID], *, now: datetime, actor: str, because: Job) -> None:
    """Re-arm the dependents of requeued ``parents``, and theirs, journalled."""
    frontier = list(parents)
    seen: set[uuid.UUID] = set(frontier)
    while frontier:
        children = sorted(
            set(joins.edges().filter(parent_id__in=frontier).values_list("child_id", flat=True))
            - seen
        )
        seen.update(children)
        # Locked before their parents are counted, as a parent's settlement locks them
        # (waiting or cancelled, in id order): a parent settling now either holds the
        # row, and is seen finished once it commits, or counts this re-arm down after.
        rows = (
            sql.dialect()
            .locked(
                sql.jobs().filter(id__in=children, status__in=[Status.WAITING, Status.CANCELLED]),
                skip_locked=False,
            )
            .order_by("id")
            .values_list("id", "kind", "status", "join_when", "run_count")
        )
        frontier = []
        entries = []
        for cid, kind, status, when, runs in rows:
            open_, dead = parent_counts(cid)
            if status == Status.WAITING:
                sql.jobs().filter(id=cid).update(parents_open=open_, parents_dead=dead)
                continue
            if status != Status.CANCELLED or when == JoinWhen.FINISHED:
                continue
            if when == JoinWhen.COMPLETED and dead:
                continue  # another parent is still dead
            sql.jobs().filter(id=cid, status=Status.CANCELLED).update(
                status=Status.WAITING, parents_open=open_, parents_dead=dead, finished_at=None
            )
            entries.append(
                JournalEntry(
                    job_id=cid,
                    kind=kind,
                    run_no=runs,
                    outcome=Outcome.REQUEUED,
                    recorded_at=now,
                    actor=actor,
                    note=f"re-armed: waiting again, as step {because.step_name!r} "
                    f"({because.id}) was requeued",
                )
            )
            frontier.append(cid)
        sql.journal_entries().bulk_create(entries)


def recount(workflow_id: uuid.UUID | None) -> None:
    """A workflow's counters from its steps (an operator's path): running again if a
    step is open, else the status its last settlement gives (``rules.joins.outcome``).
    It locks the workflow's row before it counts, so it comes after every job row the
    transaction locks (a settlement holding a child it re-arms may wait for the
    workflow's row next), and it counts what every settlement that held the row before
    it committed (a count read first, then written after such a settlement, had put a
    finished workflow back to running for good)."""
    if workflow_id is None:
        return
    row = (
        sql.dialect()
        .locked(joins.workflows().filter(id=workflow_id), skip_locked=False)
        .values_list("status", "cancel_requested")
        .first()
    )
    if row is None:
        return
    status, cancel_requested = row
    steps = sql.jobs().filter(workflow_id=workflow_id)
    open_ = steps.exclude(status__in=TERMINAL).count()
    dead = steps.filter(status=Status.DEAD).count()
    changes: dict[str, object] = {"steps_open": open_, "steps_dead": dead}
    if open_:
        changes.update(status=WorkflowStatus.RUNNING, finished_at=None, cancel_requested=False)
    elif status == WorkflowStatus.RUNNING:
        changes.update(
            status=outcome(cancel_requested=cancel_requested, steps_dead=dead),
            finished_at=timezone.now(),
        )
    joins.workflows().filter(id=workflow_id).update(**changes)


def cancel_children(*, job_ids: Iterable[uuid.UUID], actor: str = "") -> list[uuid.UUID]:
    """Cancel the running child workflows (``ctx.step_workflow``) these jobs recorded
    and still wait for, each step journalled naming its parent, and so theirs in turn
    (``cancel_workflow`` cascades to its steps' children); in the caller's transaction.
    Returns the workflows cancelled here."""
    cancelled: list[uuid.UUID] = []
    for parent, workflow_id in _waited_children(list(job_ids)):
        _cancel(workflow_id, actor, f"its parent job {parent} was cancelled")
        cancelled.append(workflow_id)
    return cancelled


def _waited_children(job_ids: list[uuid.UUID]) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(parent, child workflow) of the children these jobs enqueued and have not yet
    joined, whose workflows still run."""
    if not job_ids:
        return []
    rows = StepRecord.objects.using(sql.alias()).filter(job_id__in=job_ids).order_by("id")
    waited: dict[tuple[uuid.UUID, str], uuid.UUID] = {}
    for job_id, record in rows.values_list("job_id", "record"):
        if not isinstance(record, dict) or record.get("kind") not in (
            children.CHILD,
            children.JOINED,
        ):
            continue
        key = (job_id, str(record.get("name")))
        if record["kind"] == children.JOINED:
            waited.pop(key, None)
            continue
        try:
            waited[key] = uuid.UUID(str(record.get("workflow")))
        except ValueError:
            continue
    running = set(
        joins.workflows()
        .filter(id__in=list(waited.values()), status=WorkflowStatus.RUNNING)
        .values_list("id", flat=True)
    )
    return [(job, wf) for (job, _), wf in waited.items() if wf in running]
