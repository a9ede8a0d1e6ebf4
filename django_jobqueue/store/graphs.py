"""Reading workflows for people: the list, one workflow's steps and edges, and a step's
parents and children. What the admin's pages and ``jobqueue workflows``/``workflow``
show; nothing here decides or changes anything.

Steps are read by the ``(workflow, status)`` index and only their small columns (a
step's payload and result can be megabytes; a chord can have tens of thousands of
steps), and every read is bounded by a ``limit`` its caller names.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Count, QuerySet

from django_jobqueue.errors import InvalidFilter
from django_jobqueue.models import Job, StepEdge, Workflow, WorkflowStatus
from django_jobqueue.store import sql

# The columns a step is shown with (never payload, carry or result).
STEP_COLUMNS = ("id", "kind", "step_name", "status", "join_when", "parents_open", "finished_at")


@dataclass(frozen=True)
class Step:
    """A step as the graph and the listings show it."""

    id: uuid.UUID
    kind: str
    name: str
    status: str
    join_when: str
    parents_open: int


@dataclass(frozen=True)
class Graph:
    """A workflow's steps and edges (parent id, child id); ``complete`` is False when the
    workflow has more steps than were read (the caller's ``limit``)."""

    steps: list[Step]
    edges: list[tuple[uuid.UUID, uuid.UUID]]
    complete: bool


def workflows() -> QuerySet[Workflow]:
    return Workflow.objects.using(sql.alias())


def get_workflow(*, workflow_id: uuid.UUID | str) -> Workflow | None:
    """The workflow with this id, or None (also for text that is not a UUID)."""
    try:
        key = workflow_id if isinstance(workflow_id, uuid.UUID) else uuid.UUID(str(workflow_id))
    except ValueError:
        return None
    return workflows().filter(id=key).first()


def list_workflows(*, status: Sequence[str] = (), limit: int = 50) -> list[Workflow]:
    """The newest workflows first, of these statuses (every status if none)."""
    unknown = sorted(set(status) - set(WorkflowStatus.values))
    if unknown:
        raise InvalidFilter(
            f"Unknown workflow status {', '.join(unknown)}; "
            f"known: {', '.join(WorkflowStatus.values)}",
            argument="status",
        )
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidFilter(f"limit must be a positive int, got {limit!r}", argument="limit")
    qs = workflows()
    if status:
        qs = qs.filter(status__in=list(status))
    return list(qs.order_by("-created_at", "-id")[:limit])


def step_counts(*, workflow_id: uuid.UUID) -> dict[str, int]:
    """A workflow's steps by status (one index range read; zero statuses left out)."""
    rows = (
        sql.jobs()
        .filter(workflow_id=workflow_id)
        .values("status")
        .annotate(n=Count("*"))
        .order_by("status")
    )
    return {row["status"]: row["n"] for row in rows}


# Of a workflow larger than a graph's read, the steps written last that are read too:
# its ends (a chord's callback, a chain's last links) are written after the steps they
# wait on, and are the nodes an operator looks for.
TAIL_READ = 100


def graph(*, workflow_id: uuid.UUID, limit: int) -> Graph:
    """At most ``limit`` steps of a workflow and the edges among them: all of them if
    they fit, else the first written and the last ``TAIL_READ`` (see there)."""
    steps_of = sql.jobs().filter(workflow_id=workflow_id)
    columns = STEP_COLUMNS[:6]
    rows = list(steps_of.order_by("id").values_list(*columns)[: limit + 1])
    complete = len(rows) <= limit
    if not complete:
        tail = min(TAIL_READ, limit // 2)
        last = list(steps_of.order_by("-id").values_list(*columns)[:tail])
        head = rows[: limit - len(last)]
        seen = {r[0] for r in head}
        rows = head + [r for r in reversed(last) if r[0] not in seen]
    steps = [
        Step(id=r[0], kind=r[1], name=r[2] or "", status=r[3], join_when=r[4], parents_open=r[5])
        for r in rows[:limit]
    ]
    edges = list(
        StepEdge.objects.using(sql.alias())
        .filter(workflow_id=workflow_id)
        .values_list("parent_id", "child_id")
    )
    if not complete:  # only the edges among the steps read
        known = {s.id for s in steps}
        edges = [(p, c) for p, c in edges if p in known and c in known]
    return Graph(steps=steps, edges=edges, complete=complete)


def parents(*, job_id: uuid.UUID, limit: int) -> list[Step]:
    """A step's parents (at most ``limit``)."""
    edges = StepEdge.objects.using(sql.alias()).filter(child_id=job_id)
    return _steps(_edge_ends(edges, "parent_id", limit))


def children(*, job_id: uuid.UUID, limit: int) -> list[Step]:
    """A step's children (at most ``limit``)."""
    edges = StepEdge.objects.using(sql.alias()).filter(parent_id=job_id)
    return _steps(_edge_ends(edges, "child_id", limit))


def edge_counts(*, job_id: uuid.UUID) -> tuple[int, int]:
    """How many parents and children a step has."""
    edges = StepEdge.objects.using(sql.alias())
    return edges.filter(child_id=job_id).count(), edges.filter(parent_id=job_id).count()


def _edge_ends(qs: QuerySet[StepEdge], column: str, limit: int) -> list[uuid.UUID]:
    return list(qs.order_by(column).values_list(column, flat=True)[:limit])


def _steps(ids: Sequence[uuid.UUID]) -> list[Step]:
    rows = sql.jobs().filter(id__in=list(ids)).order_by("id").values_list(*STEP_COLUMNS[:6])
    return [
        Step(id=r[0], kind=r[1], name=r[2] or "", status=r[3], join_when=r[4], parents_open=r[5])
        for r in rows
    ]


def job_step(job: Job) -> Workflow | None:
    """The workflow a job is a step of (None for a plain job or one whose workflow went)."""
    if job.workflow_id is None:
        return None
    return workflows().filter(id=job.workflow_id).first()
