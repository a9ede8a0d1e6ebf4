"""Child workflows awaited from a durable step: ``ctx.step_workflow(name, child)`` and
``await ctx.astep_workflow(name, child)``.

The first run that meets the step enqueues the child (a workflow, or a job as a
workflow of one step named ``"job"``) and records it (a record of kind ``child``
naming the workflow, in the same transaction: a run that lost its claim enqueues
nothing, and every replay finds the same child). Then the parent parks, its slot free,
until the child finishes; the run after that records the child's outcome (a record of
kind ``joined``) and returns its result or raises ``ChildFailed``, as every later
replay does from the record.

How the parent wakes: the child ends with one more step, ``PARENT_STEP``, which waits
for every other step to finish (a join edge, ``when="finished"``) and then emits the
event the parent waits for (``wait_for``'s machinery: the event commits with that
step's completion, atomic, so the parent, released by it, finds the child finished).
This reuses the two mechanisms that already wake jobs exactly once, the join and the
event, instead of adding a third path to every settlement (PostgreSQL's turn settles
and releases workflow steps in one statement of its own, which a parent's wake-up
would have to join). The step runs on the parent's queue, as an atomic task of this
package (``NOTIFY_KIND``) that every worker serving that queue runs. Should the event
never come (the child's workflow cancelled by hand, which cancels that step too, or no
worker running ``NOTIFY_KIND``), the parent also wakes every ``RECHECK`` and looks.

The child's result is the workflow's own, as ``WorkflowHandle.result`` gives it: its
output step's result (a job's result for a signature, the last step's for a chain, the
callback's for a chord, ``Workflow(..., output=)``'s), a group's members' results in
order; for a workflow that declares no output step, its sink steps' results (the steps
no other of its steps waits for) by step name, in step order. Nesting is bounded by
``MAX_CHILD_DEPTH``: ``PARENT_STEP`` carries the child's depth, which its own steps read
when they start children of their own.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from django_jobqueue import conf, routing, validation
from django_jobqueue.errors import (
    ChildDepthExceeded,
    ChildFailed,
    InvalidArguments,
    InvalidStep,
    StepError,
)
from django_jobqueue.ids import uuid7
from django_jobqueue.rules.lifecycle import NOTE_LIMIT
from django_jobqueue.run import events
from django_jobqueue.run.durable import STEP_NAME_MAX
from django_jobqueue.store import children as stored_children
from django_jobqueue.store import durable as stored
from django_jobqueue.store.children import CHILD, JOINED, PARENT_STEP
from django_jobqueue.task.functions import task
from django_jobqueue.task.signature import Signature
from django_jobqueue.workflows.graph import Workflow, WorkflowShape

if TYPE_CHECKING:
    from django_jobqueue.run.durable import StepBook

NOTIFY_KIND = "jobqueue.notify_parent"
CHILD_EVENT = "django_jobqueue.child"
# How often a parent whose child's event has not come looks at the child itself.
RECHECK = timedelta(minutes=5)


@task(kind=NOTIFY_KIND, atomic=True, max_failures=None)
def notify_parent(parent: str, workflow: str, depth: int) -> None:
    """A child workflow's last step: every other step of it has finished, so the event
    its parent waits for is sent, committing with this step's completion."""
    events.emit(CHILD_EVENT, key=workflow, payload={"parent": parent, "depth": depth})


class Children:
    """One run's child workflows, recorded in its ``StepBook``."""

    def __init__(self, book: StepBook) -> None:
        self.book = book

    def step_workflow(self, name: Any, child: Any) -> Any:
        book = self.book
        name = validation.bounded_text(
            name,
            name="the step name",
            error=lambda m: InvalidStep(m, argument="name"),
            max_length=STEP_NAME_MAX,
        )
        flow = _as_workflow(name, child)
        if name in book.used:
            raise StepError(
                f"{book.job.kind}: step {name!r} is used twice in one run; step names must "
                "be unique within a run",
                kind=book.job.kind,
                job_id=book.job.id,
            )
        book.used.add(name)
        found = book._found(CHILD, name)
        book._not_inside(f"ctx.step_workflow({name!r})")
        seq = book.sequence.meet(found, name)
        if found is None:
            found = self._enqueue(name, flow, single=isinstance(child, Signature), seq=seq)
        joined = book._found(JOINED, name) or self._join(name, found)
        return _outcome(book.job.kind, name, joined)

    async def astep_workflow(self, name: Any, child: Any) -> Any:
        self.book._not_inside(f"ctx.astep_workflow({name!r})")
        return await sync_to_async(self.step_workflow)(name, child)

    def _enqueue(self, name: str, flow: Workflow, *, single: bool, seq: int) -> dict[str, Any]:
        """Enqueue the child and record it, in one transaction (a savepoint in an atomic
        task's): a lost claim records nothing and leaves no child."""
        book = self.book
        job = book.job
        depth = stored_children.depth_of(workflow_id=job.workflow_id) + 1
        limit = conf.get().max_child_depth
        if depth > limit:
            raise ChildDepthExceeded(
                f"{job.kind}: ctx.step_workflow({name!r}) would start a child at depth "
                f"{depth}, deeper than MAX_CHILD_DEPTH ({limit}): job {job.id} is itself "
                f"a child at depth {depth - 1}; nothing was enqueued",
                kind=job.kind,
                job_id=job.id,
                depth=depth,
            )
        workflow_id = uuid7()
        notify = notify_parent.using(queue=job.queue).s(
            parent=str(job.id), workflow=str(workflow_id), depth=depth
        )
        record = {
            "kind": CHILD,
            "name": name,
            "workflow": str(workflow_id),
            "job": single,
            "depth": depth,
            **book._when(),
            "seq": seq,
        }
        # On the parent's own database: its notify step settles the parent's wait.
        with transaction.atomic(using=book.alias), routing.using(book.alias):
            flow.enqueue_with(last=(PARENT_STEP, notify), workflow_id=workflow_id)
            book._write(record)
        book.recorded.append(f"{name} (child workflow {workflow_id})")
        return record

    def _join(self, name: str, found: dict[str, Any]) -> dict[str, Any]:
        """The child's outcome recorded, if it has finished; else the parent parked
        until its event (or ``RECHECK``), which raises ``Parked``."""
        book = self.book
        key = str(found.get("workflow"))
        state = _state(key)
        if state is None or state.finished:
            return self._joined(name, key, state)
        deadline = timezone.now() + RECHECK
        note = f"waiting for child workflow {key} (step {name!r})"
        parking = stored.Parking(
            record=None, parked="event", wake_at=deadline, wait_name=CHILD_EVENT, wait_key=key
        )
        book.parking = book._paused(deadline, note)
        since = timezone.now() - conf.get().event_retention
        got = stored.wait(settlement=book.parking, parking=parking, since=since, taken=())
        if isinstance(got, tuple):  # the event came first: the child has finished
            state = _state(key)
            if state is None or state.finished:
                return self._joined(name, key, state)
            got = stored.park(settlement=book.parking, parking=parking)
        book._parked(got, note)
        raise AssertionError("unreachable: _parked raises")

    def _joined(self, name: str, key: str, state: Any) -> dict[str, Any]:
        book = self.book
        record: dict[str, Any] = {"kind": JOINED, "name": name, "workflow": key, **book._when()}
        if state is None:
            record.update(failed=True, status="gone", error="the child workflow no longer exists")
        elif state.failed is not None:
            job_id, step, status, note = state.failed
            record.update(
                failed=True,
                child_job=job_id,
                step=step,
                status=status,
                error=validation.clean_text(note, NOTE_LIMIT),
            )
        else:
            record["result"] = state.results
        book._write(record)
        ended = "failed" if state is None or state.failed else "completed"
        book.recorded.append(f"{name} (child {ended})")
        return record


def _state(key: str) -> Any:
    try:
        workflow_id = uuid.UUID(key)
    except ValueError:
        return None
    return stored_children.state(workflow_id=workflow_id)


def _as_workflow(name: str, child: Any) -> Workflow:
    """The child as a workflow: a workflow as it is (not a batch, which may grow), a
    signature as a workflow of one step named ``"job"``."""
    if isinstance(child, Signature):
        flow = Workflow(child.kind[:200])
        flow.add(child, name="job")
        return flow
    if isinstance(child, Workflow) and child.shape != WorkflowShape.BATCH:
        return child
    what = "a batch (its members may grow)" if isinstance(child, Workflow) else repr(child)
    raise InvalidArguments(
        f"ctx.step_workflow({name!r}, …): the child must be a workflow (Workflow, chain, "
        f"group, chord) or a signature (task.s(...)), got {what:.200}",
        argument="child",
    )


def _outcome(kind: str, name: str, joined: dict[str, Any]) -> Any:
    """The child's result as recorded, or ``ChildFailed``."""
    workflow = joined.get("workflow")
    if joined.get("failed"):
        step, status, error = joined.get("step"), joined.get("status"), joined.get("error")
        where = f"step {step!r} (job {joined.get('child_job')}) is {status}" if step else status
        raise ChildFailed(
            f"{kind}: the child workflow {workflow} of step {name!r} did not complete: "
            f"{where}: {error or '(no note)'}",
            workflow_id=workflow,
            child_job_id=joined.get("child_job"),
            step=step,
            status=status,
            error=error,
        )
    return joined.get("result")
