"""Child workflows awaited from a durable step (``ctx.step_workflow``): what the store
reads of a child (the cancel that follows a parent's to its children is
``steering.cancel_children``).

A child is an ordinary workflow whose last step, ``PARENT_STEP``, waits for every
other step to finish (``when="finished"``) and then tells the parent (``run.children``
sends the event); the parent's record of kind ``CHILD`` names the workflow. Its outcome
is read from its other steps: finished once every one of them is terminal, failed if
one of them is dead or cancelled, and its result the workflow's own (``WorkflowHandle.
result``: its output step's, a group's members' in order) or, for a workflow that
declares no output step, the results of its sink steps (those no other step of its own
waits for), by name, in step order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django_jobqueue.models import TERMINAL, Status, WorkflowShape
from django_jobqueue.store import sql
from django_jobqueue.store.joins import edges, workflows

# The step of a child workflow that tells its parent, and the parent's records: one of
# kind CHILD when it enqueued the child, one of kind JOINED once the child finished.
PARENT_STEP = "jobqueue:parent"
CHILD = "child"
JOINED = "joined"


@dataclass(frozen=True, slots=True)
class ChildState:
    """A child workflow as its parent reads it: whether its steps have all finished,
    the first that did not complete (id, name, status, last journal note), and its
    result (see the module)."""

    finished: bool
    failed: tuple[str, str, str, str] | None = None
    results: Any = None


def state(*, workflow_id: uuid.UUID) -> ChildState | None:
    """The child's state (None: no such workflow, deleted by retention or by hand)."""
    found = workflows().filter(id=workflow_id).values_list("output", "shape").first()
    if found is None:
        return None
    output, shape = found
    steps = list(
        sql.jobs()
        .filter(workflow_id=workflow_id)
        .exclude(step_name=PARENT_STEP)
        .order_by("id")
        .values_list("id", "step_name", "status", "result")
    )
    if any(status not in TERMINAL for _, _, status, _ in steps):
        return ChildState(finished=False)
    for job_id, name, status, _ in steps:
        if status != Status.COMPLETED:
            note = (
                sql.journal_entries()
                .filter(job_id=job_id)
                .order_by("-id")
                .values_list("note", flat=True)
                .first()
            )
            return ChildState(finished=True, failed=(str(job_id), name or "", status, note or ""))
    if output:
        return ChildState(finished=True, results=_result_of(steps, output))
    if shape == WorkflowShape.GROUP:
        return ChildState(finished=True, results=[result for _, _, _, result in steps])
    ids = {job_id for job_id, _, _, _ in steps}
    waited_on = set(
        edges()
        .filter(workflow_id=workflow_id, parent_id__in=ids, child_id__in=ids)
        .values_list("parent_id", flat=True)
    )
    results = {name or "": result for job_id, name, _, result in steps if job_id not in waited_on}
    return ChildState(finished=True, results=results)


def _result_of(steps: list[tuple[Any, Any, Any, Any]], output: str) -> Any:
    return next(result for _, name, _, result in steps if name == output)


def depth_of(*, workflow_id: uuid.UUID | None) -> int:
    """How deep a job of this workflow is among children (0: no child at all): the
    depth its workflow's ``PARENT_STEP`` carries in its payload."""
    if workflow_id is None:
        return 0
    payload = (
        sql.jobs()
        .filter(workflow_id=workflow_id, step_name=PARENT_STEP)
        .values_list("payload", flat=True)
        .first()
    )
    depth = payload.get("depth") if isinstance(payload, dict) else None
    return depth if isinstance(depth, int) else 0
