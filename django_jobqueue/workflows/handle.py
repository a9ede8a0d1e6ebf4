"""What callers hold of an enqueued workflow: ``WorkflowHandle``, and ``workflow(id)``
to look one up later."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING

from django_jobqueue import store
from django_jobqueue.errors import WorkflowNotFound
from django_jobqueue.store import workflows as stored
from django_jobqueue.task.handle import JobHandle

if TYPE_CHECKING:
    from django_jobqueue.models import Workflow

# The store is imported where it is used: ``django_jobqueue`` imports this module before
# Django's apps (and so the models) are loaded.


class WorkflowHandle:
    """A workflow as it was read or written; ``refresh()`` re-reads it and its steps.

    ``status`` is ``running`` until every step is terminal, then ``completed``,
    ``failed`` (a step died) or ``cancelled`` (an operator cancelled it). ``steps``
    maps each step's name to its ``JobHandle``.
    """

    def __init__(self, wf: Workflow, steps: dict[str, JobHandle] | None = None) -> None:
        self._wf = wf
        self.id: uuid.UUID = wf.id
        self._steps = steps

    @property
    def workflow(self) -> Workflow:
        return self._wf

    @property
    def name(self) -> str:
        return self._wf.name

    @property
    def shape(self) -> str:
        return self._wf.shape

    @property
    def status(self) -> str:
        return self._wf.status

    @property
    def steps_total(self) -> int:
        return self._wf.steps_total

    @property
    def steps_open(self) -> int:
        return self._wf.steps_open

    @property
    def finished_at(self) -> datetime | None:
        return self._wf.finished_at

    @property
    def steps(self) -> dict[str, JobHandle]:
        """Step name -> its job (read on first use, and again after ``refresh()``)."""
        if self._steps is None:
            self._steps = {
                job.step_name or str(job.id): JobHandle(job)
                for job in stored.steps_of(workflow_id=self.id)
            }
        return self._steps

    def refresh(self) -> WorkflowHandle:
        found = stored.get_workflow(workflow_id=self.id)
        if found is None:
            raise WorkflowNotFound(f"No workflow with id {self.id}", workflow_id=self.id)
        self._wf = found
        self._steps = None
        return self

    def cancel(self, *, actor: str = "") -> WorkflowHandle:
        """Cancel every step that has not finished (a running one cooperatively, as
        ``cancel()`` does); the workflow ends ``cancelled``."""
        store.cancel_workflow(workflow_id=self.id, actor=actor)
        return self.refresh()

    def retry_dead(self, *, actor: str = "") -> WorkflowHandle:
        """Requeue every dead step, re-arming the steps their deaths cancelled."""
        store.retry_dead_steps(workflow_id=self.id, actor=actor)
        return self.refresh()

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.name!r} {self.id} {self.status}>"


def workflow(workflow_id: uuid.UUID | str) -> WorkflowHandle:
    """The workflow with this id (``WorkflowNotFound`` if there is none)."""

    try:
        key = store.as_uuid(workflow_id)
    except Exception:
        raise WorkflowNotFound(
            f"No workflow with id {workflow_id!r}", workflow_id=workflow_id
        ) from None
    found = stored.get_workflow(workflow_id=key)
    if found is None:
        raise WorkflowNotFound(f"No workflow with id {workflow_id}", workflow_id=workflow_id)
    return WorkflowHandle(found)
