"""What callers hold of an enqueued workflow: ``WorkflowHandle``, and ``workflow(id)``
to look one up later."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from django_jobqueue import routing, store
from django_jobqueue.errors import (
    InvalidArguments,
    NoWorkflowOutput,
    WorkflowFailed,
    WorkflowNotFinished,
    WorkflowNotFound,
)
from django_jobqueue.states import WorkflowStatus
from django_jobqueue.store import workflows as stored
from django_jobqueue.task.handle import JobHandle

if TYPE_CHECKING:
    from django_jobqueue.models import Workflow

# The store is imported where it is used: ``django_jobqueue`` imports this module before
# Django's apps (and so the models) are loaded.

FIRST_PAUSE = 0.05  # wait(): the first pause between looks, in seconds, growing by half
LONGEST_PAUSE = 1.0  # each time up to this


class WorkflowHandle:
    """A workflow as it was read or written; ``refresh()`` re-reads it and its steps.

    ``status`` is ``running`` until every step is terminal, then ``completed``,
    ``failed`` (a step died) or ``cancelled`` (an operator cancelled it). ``steps``
    maps each step's name to its ``JobHandle``.
    """

    def __init__(
        self,
        wf: Workflow,
        steps: dict[str, JobHandle] | None = None,
        *,
        database: str | None = None,
    ) -> None:
        self._wf = wf
        self.id: uuid.UUID = wf.id
        self._steps = steps
        #: The queue database the whole workflow lives on (its root's).
        self.database: str = routing.current() if database is None else database

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
            with routing.using(self.database):
                self._steps = {
                    job.step_name or str(job.id): JobHandle(job, database=self.database)
                    for job in stored.steps_of(workflow_id=self.id)
                }
        return self._steps

    @property
    def output(self) -> str:
        """The name of the step whose result is the workflow's ("" for none)."""
        return self._wf.output

    @property
    def result(self) -> Any:
        """The workflow's result, as this handle read it (``refresh()`` or ``wait()``
        read it again): its output step's result (``Workflow(..., output=)``, a chain's
        last step, a chord's callback, a workflow's one final step), or for a group the
        list of its members' results in order. Raises ``WorkflowNotFinished`` while it
        runs, ``WorkflowFailed`` when a step died or it was cancelled, and
        ``NoWorkflowOutput`` when it declares no output step."""
        with routing.using(self.database):
            return self._result()

    def _result(self) -> Any:
        wf = self._wf
        if wf.status == WorkflowStatus.RUNNING:
            raise WorkflowNotFinished(
                f"workflow {wf.name!r} {wf.id} is still running ({wf.steps_open} of "
                f"{wf.steps_total} steps open): wait() for its result",
                workflow_id=wf.id,
                status=wf.status,
            )
        if wf.status != WorkflowStatus.COMPLETED:
            failed = stored.failed_steps(workflow_id=wf.id)
            named = ", ".join(f"{name!r} {status}" for name, status in failed) or "none"
            how = "was cancelled" if wf.status == WorkflowStatus.CANCELLED else "failed"
            raise WorkflowFailed(
                f"workflow {wf.name!r} {wf.id} {how}, so it has no result (steps: {named})",
                workflow_id=wf.id,
                status=wf.status,
                steps=[name for name, _ in failed],
            )
        if wf.output:
            return stored.step_result(workflow_id=wf.id, name=wf.output)
        if wf.shape == "group":
            return stored.results_of(workflow_id=wf.id)
        raise NoWorkflowOutput(
            f"workflow {wf.name!r} {wf.id} declares no output step (Workflow(..., "
            "output=...)): read each step's result from its steps",
            workflow_id=wf.id,
        )

    def wait(self, timeout: float | None = None, *, interval: float | None = None) -> Any:
        """Block until the workflow finished, then return its ``result`` (raising what
        ``result`` raises); the builtin ``TimeoutError`` when ``timeout`` seconds pass
        first. It looks every ``interval`` seconds (None: from 50 ms, backing off to
        1 s)."""
        deadline, pause = _deadline(timeout, interval)
        while not self._finished():
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out(timeout)
            time.sleep(min(left, pause))
            pause = interval or min(pause * 1.5, LONGEST_PAUSE)
        return self.result

    async def await_result(
        self, timeout: float | None = None, *, interval: float | None = None
    ) -> Any:
        """``wait()`` for async code: awaits the workflow's end, holding no thread."""
        deadline, pause = _deadline(timeout, interval)
        while not await sync_to_async(self._finished)():
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._timed_out(timeout)
            await asyncio.sleep(min(left, pause))
            pause = interval or min(pause * 1.5, LONGEST_PAUSE)
        return await sync_to_async(lambda: self.result)()

    def _finished(self) -> bool:
        """Read the workflow again; whether it finished. The one place ``wait`` looks:
        a notification of its output step's settlement can wake it instead."""
        return self.refresh().status != WorkflowStatus.RUNNING

    def _timed_out(self, timeout: float | None) -> TimeoutError:
        return TimeoutError(f"workflow {self.id} did not finish within {timeout} s")

    def refresh(self) -> WorkflowHandle:
        with routing.using(self.database):
            found = stored.get_workflow(workflow_id=self.id)
        if found is None:
            raise WorkflowNotFound(f"No workflow with id {self.id}", workflow_id=self.id)
        self._wf = found
        self._steps = None
        return self

    def cancel(self, *, actor: str = "") -> WorkflowHandle:
        """Cancel every step that has not finished (a running one cooperatively, as
        ``cancel()`` does); the workflow ends ``cancelled``."""
        with routing.using(self.database):
            store.cancel_workflow(workflow_id=self.id, actor=actor)
        return self.refresh()

    def retry_dead(self, *, actor: str = "") -> WorkflowHandle:
        """Requeue every dead step, re-arming the steps their deaths cancelled."""
        with routing.using(self.database):
            store.retry_dead_steps(workflow_id=self.id, actor=actor)
        return self.refresh()

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.name!r} {self.id} {self.status}>"


def _deadline(timeout: Any, interval: Any) -> tuple[float, float]:
    """``wait``'s deadline (monotonic; infinite for None) and first pause."""
    for name, value in (("timeout", timeout), ("interval", interval)):
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
            or (name == "interval" and value == 0)
        ):
            raise InvalidArguments(
                f"wait({name}=…) takes seconds ({'more than ' if name == 'interval' else ''}"
                f"0{' or more' if name == 'timeout' else ''}) or None, got {value!r:.80}",
                argument=name,
            )
    deadline = math.inf if timeout is None else time.monotonic() + timeout
    return deadline, interval or FIRST_PAUSE


def workflow(workflow_id: uuid.UUID | str) -> WorkflowHandle:
    """The workflow with this id (``WorkflowNotFound`` if there is none)."""

    try:
        key = store.as_uuid(workflow_id)
    except Exception:
        raise WorkflowNotFound(
            f"No workflow with id {workflow_id!r}", workflow_id=workflow_id
        ) from None
    database = store.database_of_workflow(key)
    found = None
    if database is not None:
        with routing.using(database):
            found = stored.get_workflow(workflow_id=key)
    if found is None:
        raise WorkflowNotFound(f"No workflow with id {workflow_id}", workflow_id=workflow_id)
    return WorkflowHandle(found, database=database)
