"""Writing and reading workflows: the workflow row, its steps (one bulk statement per
chunk, as ``enqueue_many``) and its edges, all in the caller's transaction; the reads a
running step and a workflow's handle make.

The store is handed a workflow already validated (``workflows.graph``: names, cycles,
joins); it writes, never decides.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from django_jobqueue import tracing
from django_jobqueue.ids import uuid7, uuid7_many
from django_jobqueue.models import Job, Status, Workflow
from django_jobqueue.store import sql
from django_jobqueue.store.bulk import bulk_rows
from django_jobqueue.store.dialects.base.storage import NewStep
from django_jobqueue.store.inserting import (
    BULK_BATCH,
    EnqueueRequest,
    NewJob,
    take_rate_tokens,
)
from django_jobqueue.store.joins import edges, workflows


@dataclass(frozen=True)
class StepSpec:
    """One step to write: its name, its job's request, its parents (indexes of earlier
    or later steps of the same list) and when they release it."""

    name: str
    request: EnqueueRequest
    parents: tuple[int, ...] = ()
    when: str = "completed"


def enqueue_workflow(
    *,
    name: str,
    shape: str,
    steps: Sequence[StepSpec],
    output: str = "",
    workflow_id: uuid.UUID | None = None,
) -> tuple[Workflow, list[NewJob]]:
    """Write a workflow, its steps and its edges in one transaction (joining the
    caller's): roots pending, the others waiting on their parents' count. The rate
    limits of the steps' kinds and keys take their tokens first, as ``enqueue_many``'s.
    ``output`` names the step whose result is the workflow's ("" for none);
    ``workflow_id``: the id to give it (a new one by default), for a caller that names
    it in a step's payload."""
    now = timezone.now()
    alias = sql.alias()
    ids = uuid7_many(len(steps))
    context = tracing.capture_context()  # the enqueuing code's, for every step
    with transaction.atomic(using=alias):
        take_rate_tokens([spec.request for spec in steps])
        wf = Workflow(
            id=workflow_id or uuid7(),
            name=name,
            shape=shape,
            steps_total=len(steps),
            steps_open=len(steps),
            created_at=now,
            output=output,
        )
        wf.save(using=alias, force_insert=True)
        news = list(bulk_rows([spec.request for spec in steps], ids, now, context))
        rows = [
            NewStep(
                row=news[i],
                workflow_id=wf.id,
                step_name=spec.name,
                join_when=spec.when,
                parents_open=len(spec.parents),
                status=Status.WAITING if spec.parents else Status.PENDING,
            )
            for i, spec in enumerate(steps)
        ]
        links = [(wf.id, ids[p], ids[i]) for i, spec in enumerate(steps) for p in spec.parents]
        sql.dialect().insert_graph(rows, links, batch=BULK_BATCH)
    handles = [
        NewJob(id=ids[i], kind=spec.request.kind, status=rows[i].status)
        for i, spec in enumerate(steps)
    ]
    return wf, handles


def get_workflow(*, workflow_id: uuid.UUID) -> Workflow | None:
    return workflows().filter(id=workflow_id).first()


def steps_of(*, workflow_id: uuid.UUID) -> list[Job]:
    """A workflow's steps, in the order they were written."""
    return list(sql.jobs().filter(workflow_id=workflow_id).order_by("id"))


def step_result(*, workflow_id: uuid.UUID, name: str) -> Any:
    """The result of the workflow's step ``name`` (None when it has none)."""
    rows = sql.jobs().filter(workflow_id=workflow_id, step_name=name).values_list("result")
    found = rows.first()
    return None if found is None else found[0]


def results_of(*, workflow_id: uuid.UUID) -> list[Any]:
    """Every step's result, in the order the steps were written (a group's result); a
    child workflow's step that tells its parent is none of its own."""
    from django_jobqueue.store.children import PARENT_STEP

    rows = (
        sql.jobs()
        .filter(workflow_id=workflow_id)
        .exclude(step_name=PARENT_STEP)
        .order_by("id")
        .values_list("result")
    )
    return [result for (result,) in rows]


def failed_steps(*, workflow_id: uuid.UUID, limit: int = 10) -> list[tuple[str, str]]:
    """Up to ``limit`` of the workflow's steps that are dead or cancelled, as (name,
    status), in the order written: what a failed workflow's error names."""
    rows = (
        sql.jobs()
        .filter(workflow_id=workflow_id, status__in=[Status.DEAD, Status.CANCELLED])
        .order_by("id")
        .values_list("step_name", "status")[:limit]
    )
    return [(name or "", status) for name, status in rows]


def parent_results(*, job_id: uuid.UUID) -> dict[str, Any]:
    """A step's parents' results by step name, in one query."""
    rows = sql.jobs().filter(child_edges__child_id=job_id).values_list("step_name", "result")
    return {name or "": result for name, result in rows}


# A batch's callbacks, by step name (the members are every other step).
CALLBACKS = {"on_success": "completed", "on_failure": "failed", "on_finish": "finished"}


def add_to_batch(*, workflow_id: uuid.UUID, request: EnqueueRequest) -> NewJob:
    """Add a member to an open batch, in the caller's transaction (the adding member's
    run, or an atomic run's settlement transaction): the new member is pending, and
    each waiting callback waits for one parent more, so none can fire before it ends.

    The callbacks and then the workflow are locked in that order, as a settlement's
    release locks them."""
    from django.db.models import F

    from django_jobqueue.errors import InvalidTransition

    now = timezone.now()
    alias = sql.alias()
    with transaction.atomic(using=alias):
        callbacks = list(
            sql.dialect()
            .locked(
                sql.jobs().filter(
                    workflow_id=workflow_id, step_name__in=list(CALLBACKS), status=Status.WAITING
                ),
                skip_locked=False,
            )
            .order_by("id")
            .values_list("id", flat=True)
        )
        wf = sql.dialect().locked(workflows().filter(id=workflow_id), skip_locked=False).first()
        if wf is None or wf.shape != "batch" or wf.status != "running" or wf.cancel_requested:
            state = "gone" if wf is None else ("cancelled" if wf.cancel_requested else wf.status)
            raise InvalidTransition(
                f"batch {workflow_id} is {state}: no member can be added to it",
                workflow_id=workflow_id,
            )
        job_id = uuid7()
        step = NewStep(
            row=next(bulk_rows([request], [job_id], now, tracing.capture_context())),
            workflow_id=workflow_id,
            step_name=str(job_id),
            join_when="completed",
            parents_open=0,
            status=Status.PENDING,
        )
        sql.dialect().insert_steps([step])
        sql.dialect().insert_edges([(workflow_id, job_id, c) for c in callbacks])
        if callbacks:
            sql.jobs().filter(id__in=callbacks).update(parents_open=F("parents_open") + 1)
        workflows().filter(id=workflow_id).update(
            steps_total=F("steps_total") + 1, steps_open=F("steps_open") + 1
        )
    return NewJob(id=job_id, kind=request.kind)


def members(*, workflow_id: uuid.UUID, status: str | None = None) -> list[Job]:
    """A batch's members (every step but its callbacks), oldest first."""
    qs = sql.jobs().filter(workflow_id=workflow_id).exclude(step_name__in=list(CALLBACKS))
    if status is not None:
        qs = qs.filter(status=status)
    return list(qs.order_by("id"))


def step_of_batch(*, job_id: uuid.UUID, workflow_id: uuid.UUID) -> str | None:
    """The step's name if its workflow is a batch, else None."""
    row = (
        sql.jobs()
        .filter(id=job_id, workflow_id=workflow_id, workflow__shape="batch")
        .values_list("step_name", flat=True)
        .first()
    )
    return None if row is None else (row or "")


def edges_of(*, workflow_id: uuid.UUID) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """A workflow's edges as (parent id, child id), for its graph."""
    return list(
        edges().filter(workflow_id=workflow_id).order_by("id").values_list("parent_id", "child_id")
    )


def neighbours(*, job_id: uuid.UUID) -> tuple[list[Job], list[Job]]:
    """A step's parents and children (a job page's links), each by id."""
    parents = sql.jobs().filter(child_edges__child_id=job_id).order_by("id")
    children = sql.jobs().filter(parent_edges__parent_id=job_id).order_by("id")
    return list(parents), list(children)
