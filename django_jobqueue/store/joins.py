"""Joins: what a workflow step's ending does to its dependents and its workflow.

Called in the transaction that made the steps terminal (a guarded settlement, an
operator's cancel), and only for steps: a plain job never comes here. Per finished
parent it reads its child edges and, under each waiting child's row lock, updates the
child's counters as ``rules.joins.join`` decides (one UPDATE per child edge, never a scan
of siblings): released children become pending (and the workers are woken), cancelled
ones are journalled naming the parent and cascade to their own dependents. The
workflow's open and dead step counters follow, and the step that closes the last open
one sets the workflow's status.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from django_jobqueue.models import TERMINAL, JournalEntry, Outcome, Status, StepEdge, Workflow
from django_jobqueue.rules.joins import cancel_note, join, outcome
from django_jobqueue.store import sql, wakeups


@dataclass(frozen=True, slots=True)
class Ended:
    """A step that became terminal (``status``) in the current transaction."""

    id: uuid.UUID
    status: str
    workflow_id: uuid.UUID
    name: str
    # Its children, when read with it (``ended_steps``); None: not read yet.
    children: tuple[uuid.UUID, ...] | None = None


def edges() -> QuerySet[StepEdge]:
    return StepEdge.objects.using(sql.alias())


def workflows() -> QuerySet[Workflow]:
    return Workflow.objects.using(sql.alias())


def ended_steps(job_ids: Iterable[uuid.UUID]) -> list[Ended]:
    """Of these jobs, the workflow steps that are terminal now, each with its children
    (one query: the steps joined with their edges)."""
    ids = list(job_ids)
    if not ids:
        return []
    rows = (
        sql.jobs()
        .filter(id__in=ids, status__in=TERMINAL, workflow__isnull=False)
        .values_list("id", "status", "workflow_id", "step_name", "child_edges__child_id")
    )
    found: dict[uuid.UUID, tuple[str, uuid.UUID, str]] = {}
    children: dict[uuid.UUID, list[uuid.UUID]] = {}
    for i, status, wf, name, child in rows:
        found[i] = (status, wf, name or "")
        kids = children.setdefault(i, [])
        if child is not None:
            kids.append(child)
    return [Ended(i, *found[i], children=tuple(children[i])) for i in found]


def release(job_ids: Iterable[uuid.UUID], *, now: datetime) -> None:
    """Apply the endings of these jobs (those that are terminal workflow steps) to their
    dependents and workflows, in the caller's transaction."""
    finished(ended_steps(job_ids), now=now)


def finished(ended: Sequence[Ended], *, now: datetime) -> None:
    """Release, cancel or count down the children of steps that just ended, cascading
    through cancelled children; then close the workflows' counters."""
    closed: dict[uuid.UUID, list[int]] = {}
    notes: list[JournalEntry] = []
    queues: set[str] = set()
    frontier = list(ended)
    while frontier:
        for e in frontier:
            counts = closed.setdefault(e.workflow_id, [0, 0])
            counts[0] += 1
            counts[1] += 1 if e.status == Status.DEAD else 0
        frontier = _children_of(frontier, now=now, notes=notes, queues=queues)
    if notes:  # the children cancelled: announced as settled (their waiters wake)
        sql.journal_entries().bulk_create(notes)
        wakeups.announce_settled(n.job_id for n in notes)
    for workflow_id in sorted(closed):
        close(workflow_id, closed=closed[workflow_id][0], dead=closed[workflow_id][1], now=now)
    for queue in sorted(queues):
        wakeups.notify(sql.alias(), queue)


# What a parent's ending locks of its children: those it may count down, and those a
# re-arm may make waiting again.
_ARMED = (Status.WAITING, Status.CANCELLED)
_CHILD = (
    "id",
    "kind",
    "queue",
    "join_when",
    "parents_open",
    "parents_dead",
    "workflow_id",
    "step_name",
    "visible_at",
    "run_count",
)


def _children_of(
    parents: Sequence[Ended], *, now: datetime, notes: list[JournalEntry], queues: set[str]
) -> list[Ended]:
    """Apply ``parents``' endings to their waiting children; the children cancelled."""
    by_id = {p.id: p for p in parents}
    tally: dict[uuid.UUID, list[int]] = {}  # child: [completed, failed]
    failed_parent: dict[uuid.UUID, Ended] = {}
    for parent_id, child_id in _edges(parents):
        parent = by_id[parent_id]
        counts = tally.setdefault(child_id, [0, 0])
        if parent.status == Status.COMPLETED:
            counts[0] += 1
        else:
            counts[1] += 1
            failed_parent.setdefault(child_id, parent)
    if not tally:
        return []
    # Cancelled children are locked too: an operator's re-arm of one (``steering.rearm``)
    # counts its open parents under this lock, so it either waits for this settlement
    # and sees the parent finished, or commits first and is counted down here.
    children = (
        sql.dialect()
        .locked(sql.jobs().filter(id__in=list(tally), status__in=_ARMED), skip_locked=False)
        .order_by("id")
        .values_list(*_CHILD, "status")
    )
    cancelled: list[Ended] = []
    for cid, kind, queue, when, open_, dead, wf, name, visible, runs, status in children:
        if status != Status.WAITING:
            continue
        completed, failed = tally[cid]
        j = join(
            when=when, parents_open=open_, parents_dead=dead, completed=completed, failed=failed
        )
        changes: dict[str, object] = {
            "parents_open": j.parents_open,
            "parents_dead": j.parents_dead,
        }
        if j.status != Status.WAITING:
            changes["status"] = j.status
        if j.status == Status.PENDING:
            changes["visible_at"] = max(visible, now)
            queues.add(queue)
        elif j.status == Status.CANCELLED:
            changes["finished_at"] = now
            parent = failed_parent.get(cid) or parents[0]
            note = cancel_note(parent.name, parent.id, parent.status, when)
            notes.append(
                JournalEntry(
                    job_id=cid,
                    kind=kind,
                    run_no=runs,
                    outcome=Outcome.CANCELLED,
                    recorded_at=now,
                    note=note,
                )
            )
            cancelled.append(Ended(cid, Status.CANCELLED, wf, name or ""))
        sql.jobs().filter(id=cid, status=Status.WAITING).update(**changes)
    return cancelled


def _edges(parents: Sequence[Ended]) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(parent, child) of each of ``parents``: read with them, else queried here."""
    known = [(p.id, c) for p in parents if p.children is not None for c in p.children]
    unread = [p.id for p in parents if p.children is None]
    if unread:
        known += edges().filter(parent_id__in=unread).values_list("parent_id", "child_id")
    return known


def close(workflow_id: uuid.UUID, *, closed: int, dead: int, now: datetime) -> None:
    """Count ``closed`` more steps of a workflow terminal (``dead`` of them dead); the
    one that closes its last open step sets its status and finish time."""
    row = (
        sql.dialect()
        .locked(workflows().filter(id=workflow_id), skip_locked=False)
        .values_list("steps_open", "steps_dead", "cancel_requested", "status")
        .first()
    )
    if row is None:
        return
    steps_open, steps_dead, cancel_requested, status = row
    changes: dict[str, object] = {
        "steps_open": max(steps_open - closed, 0),
        "steps_dead": steps_dead + dead,
    }
    if changes["steps_open"] == 0 and status == "running":
        changes["status"] = outcome(cancel_requested=cancel_requested, steps_dead=steps_dead + dead)
        changes["finished_at"] = now
    workflows().filter(id=workflow_id).update(**changes)
