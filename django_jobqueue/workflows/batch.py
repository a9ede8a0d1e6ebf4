"""Batches: an open set of members whose callbacks fire once, when the last member has
finished and no member can add more (a member adds only while it runs, and the member
it adds is counted by every callback before the adding member can settle).

``on_success`` runs if every member completed, ``on_failure`` if any died (or was
cancelled), ``on_finish`` in any case; each reads the members' outcomes through
``ctx.batch.members()`` rather than an argument of every result.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django_jobqueue.errors import InvalidArguments, InvalidTransition
from django_jobqueue.states import JoinWhen
from django_jobqueue.store import workflows as stored
from django_jobqueue.task import signalling
from django_jobqueue.task.handle import JobHandle
from django_jobqueue.task.signature import Signature
from django_jobqueue.workflows.graph import Workflow, WorkflowShape, _signatures

if TYPE_CHECKING:
    from django_jobqueue.task.handle import JobHandle
    from django_jobqueue.workflows.handle import WorkflowHandle

# Each callback's step name and its join.
CALLBACKS = {
    "on_success": JoinWhen.COMPLETED,
    "on_failure": JoinWhen.FAILED,
    "on_finish": JoinWhen.FINISHED,
}


class Batch:
    """Members added with ``add``, callbacks given here; ``enqueue()`` writes them all."""

    def __init__(
        self,
        *,
        on_success: Signature | None = None,
        on_failure: Signature | None = None,
        on_finish: Signature | None = None,
        name: str = "batch",
    ) -> None:
        self.name = name
        given = {"on_success": on_success, "on_failure": on_failure, "on_finish": on_finish}
        self._callbacks: dict[str, Signature] = {}
        for step, sig in given.items():
            if sig is not None:
                self._callbacks[step] = _signatures(f"batch {step}", [sig])[0]
        self._members: list[Signature] = []

    def add(self, sig: Signature) -> Batch:
        """Add a member (before ``enqueue``; a running member uses ``ctx.batch.add``)."""
        self._members.extend(_signatures("batch", [sig]))
        return self

    def enqueue(self) -> WorkflowHandle:
        """Write the batch (joining the caller's transaction): members "0", "1", …, and
        its callbacks "on_success", "on_failure", "on_finish" after every member."""
        wf = Workflow(self.name, shape=WorkflowShape.BATCH)
        members = [wf.add(sig) for sig in self._members]
        if not members:
            wf._empty = f"batch {self.name!r} has no member: add one before enqueue()"
        for step, sig in self._callbacks.items():
            wf.add(sig, name=step, after=members, when=CALLBACKS[step])
        return wf.enqueue()


class BatchContext:
    """``ctx.batch`` in a running step of a batch: add members, read them."""

    def __init__(self, workflow_id: uuid.UUID, *, step_name: str) -> None:
        self.id = workflow_id
        self.step_name = step_name

    @property
    def is_callback(self) -> bool:
        return self.step_name in CALLBACKS

    def add(self, sig: Signature) -> JobHandle:
        """Add a member to this batch, in this run's transaction: the callbacks wait for
        it too. Only a member may add (a callback runs when none can)."""
        if not isinstance(sig, Signature):
            raise InvalidArguments(
                f"ctx.batch.add takes a signature (task.s(...)), not {type(sig).__name__}"
            )
        if self.is_callback:
            raise InvalidTransition(
                f"batch {self.id}: its {self.step_name} callback cannot add a member (it runs "
                "once no member can)",
                workflow_id=self.id,
            )
        handle = JobHandle(
            stored.add_to_batch(workflow_id=self.id, request=sig.request), "inserted"
        )
        signalling.enqueued([sig.request], [handle])
        return handle

    def members(self, *, status: str | None = None) -> list[JobHandle]:
        """The batch's members (with ``status``, only those), oldest first."""
        return [JobHandle(job) for job in stored.members(workflow_id=self.id, status=status)]

    def __repr__(self) -> str:
        return f"<BatchContext {self.id} ({self.step_name})>"


def batch_context(job_id: uuid.UUID, workflow_id: uuid.UUID) -> BatchContext | None:
    """``ctx.batch`` for a step: its batch's context, or None if its workflow is not a
    batch (one query, made on first use)."""

    found = stored.step_of_batch(job_id=job_id, workflow_id=workflow_id)
    return None if found is None else BatchContext(workflow_id, step_name=found)
