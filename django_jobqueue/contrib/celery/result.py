"""Celery's results: ``AsyncResult`` (one job), ``GroupResult`` (a group's jobs, in
order) and ``EagerResult`` (a call run here), with Celery's state names.

A failed task's exception is kept as text in its journal, never as an object:
``result``/``get()`` give a ``TaskFailed`` naming its type and message.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from typing import Any

from django_jobqueue.contrib.celery import states
from django_jobqueue.contrib.celery.exceptions import DifferentHere, TaskFailed, TaskRevokedError


class AsyncResult:
    """The result of one job, read from its row when asked (an unknown id is PENDING,
    as in Celery)."""

    def __init__(self, id: Any, *, handle: Any = None, parent: AsyncResult | None = None,
                 app: Any = None) -> None:  # fmt: skip
        self.id = str(id)
        self._handle = handle
        self.parent = parent

    task_id = property(lambda self: self.id)

    def _job(self) -> Any:
        from django_jobqueue.errors import JobNotFound
        from django_jobqueue.task.handle import JobHandle

        if self._handle is None or self._handle.status not in states_terminal():
            try:
                self._handle = JobHandle(_get_job(self.id))
            except JobNotFound:
                return None
        return self._handle

    @property
    def state(self) -> str:
        handle = self._job()
        if handle is None:
            return states.PENDING
        progress = handle.progress
        return states.of_job(handle.status, handle.failure_count, progress.note if progress else "")

    status = state

    @property
    def name(self) -> str | None:
        handle = self._job()
        return handle.kind if handle else None

    @property
    def args(self) -> list[Any] | None:
        handle = self._job()
        return handle.job.payload.get("args") if handle else None

    @property
    def kwargs(self) -> dict[str, Any] | None:
        handle = self._job()
        return handle.job.payload.get("kwargs") if handle else None

    @property
    def retries(self) -> int:
        handle = self._job()
        return handle.failure_count if handle else 0

    @property
    def date_done(self) -> Any:
        handle = self._job()
        return handle.finished_at if handle else None

    def _failure(self) -> TaskFailed | None:
        handle = self._job()
        if handle is None or handle.status not in ("dead", "claimed", "pending"):
            return None
        failed = [
            e for e in handle.journal() if e.outcome in ("dead", "retried", "stale-recovered")
        ]
        if not failed:
            return None
        head, _, rest = failed[-1].note.partition("\n")
        exc_type, sep, message = head.partition(": ")
        return TaskFailed(exc_type if sep else "", message if sep else head, rest)

    @property
    def result(self) -> Any:
        """The return value once SUCCESS; the exception (a ``TaskFailed``) once FAILURE or
        while RETRY; the progress meta while a state reported by ``update_state``."""
        handle = self._job()
        if handle is None:
            return None
        state = self.state
        if state == states.SUCCESS:
            return handle.result
        if state in (states.FAILURE, states.RETRY):
            return self._failure()
        if state == states.REVOKED:
            return TaskRevokedError(f"task {self.id} was revoked (its job was cancelled)")
        progress = handle.progress
        if progress is not None:
            return {"current": progress.done, "total": progress.total}
        return None

    info = result

    @property
    def traceback(self) -> str | None:
        failure = self._failure() if self.state == states.FAILURE else None
        return failure.traceback if failure else None

    def ready(self) -> bool:
        return self.state in states.READY_STATES

    def successful(self) -> bool:
        return self.state == states.SUCCESS

    def failed(self) -> bool:
        return self.state == states.FAILURE

    def get(self, timeout: float | None = None, propagate: bool = True,
            interval: float = 0.5, **ignored: Any) -> Any:  # fmt: skip
        """Wait for the job to finish (``TimeoutError`` after ``timeout`` seconds) and
        return its result; a failure or a revoke raises when ``propagate``."""
        from django_jobqueue.task.handle import JobHandle

        handle = self._job()
        if handle is None:
            handle = JobHandle(_get_job(self.id))  # JobNotFound: no such task
        self._handle = handle.wait(timeout=timeout, interval=interval)
        state = self.state
        if propagate and state in states.PROPAGATE_STATES:
            raise self.result
        return self.result

    wait = get

    def forget(self) -> None:
        """Celery deletes the stored result; here the result stays on the job's row until
        the job is pruned (``jobqueue cleanup``, RETENTION)."""
        warnings.warn(
            "AsyncResult.forget(): results stay with their job until it is pruned",
            DifferentHere,
            stacklevel=2,
        )

    def revoke(self, connection: Any = None, terminate: bool = False, signal: Any = None,
               wait: bool = False, timeout: float | None = None) -> None:  # fmt: skip
        revoke(self.id, terminate=terminate)

    @property
    def children(self) -> list[AsyncResult] | None:
        return None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AsyncResult):
            return other.id == self.id
        return isinstance(other, str) and other == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"<AsyncResult: {self.id}>"

    def __str__(self) -> str:
        return self.id


def states_terminal() -> tuple[str, ...]:
    from django_jobqueue.states import TERMINAL

    return tuple(TERMINAL)


def _get_job(task_id: str) -> Any:
    from django_jobqueue import store
    from django_jobqueue.errors import JobNotFound

    try:
        uuid.UUID(str(task_id))
    except ValueError:
        raise JobNotFound(f"No job with id {task_id!r}", job_id=task_id) from None
    return store.get_job(job_id=task_id)


def revoke(task_id: Any, *, terminate: bool = False) -> None:
    """Cancel the job (a running one is asked to stop); ``terminate`` stops a running one
    now (``handle.terminate()``: its process-pool child killed, its coroutine cancelled,
    its thread abandoned, as the worker's pool allows)."""
    from django_jobqueue.errors import InvalidTransition, JobNotFound
    from django_jobqueue.task.handle import JobHandle

    try:
        handle = JobHandle(_get_job(str(task_id)))
    except JobNotFound:
        return  # Celery revokes unknown ids without complaint
    try:
        if terminate:
            handle.terminate(actor="celery revoke")
        else:
            from django_jobqueue import store

            store.cancel(job_id=handle.id, actor="celery revoke")
    except InvalidTransition:
        return  # already finished: nothing to revoke, as in Celery


class GroupResult:
    """A group's results, in member order; its id is the workflow's."""

    def __init__(self, id: Any = None, results: list[Any] | None = None,
                 parent: Any = None, **ignored: Any) -> None:  # fmt: skip
        self.id = str(id) if id is not None else None
        self.results = list(results or [])
        self.parent = parent

    def __iter__(self) -> Iterator[Any]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> Any:
        return self.results[index]

    def get(self, timeout: float | None = None, propagate: bool = True,
            interval: float = 0.5, **ignored: Any) -> list[Any]:  # fmt: skip
        return [r.get(timeout=timeout, propagate=propagate, interval=interval) for r in self]

    join = get

    def ready(self) -> bool:
        return all(r.ready() for r in self)

    def successful(self) -> bool:
        return all(r.successful() for r in self)

    def failed(self) -> bool:
        return any(r.failed() for r in self)

    def waiting(self) -> bool:
        return not self.ready()

    def completed_count(self) -> int:
        return sum(1 for r in self if r.successful())

    def revoke(self, terminate: bool = False, **ignored: Any) -> None:
        for r in self:
            r.revoke(terminate=terminate)

    def save(self, backend: Any = None) -> GroupResult:
        return self  # the workflow's rows keep it

    @classmethod
    def restore(cls, id: Any, backend: Any = None, app: Any = None) -> GroupResult:
        """The group with this id: its workflow's steps, in order."""
        from django_jobqueue.workflows.handle import workflow

        steps = workflow(id).steps
        ordered = sorted(steps.items(), key=lambda item: (len(item[0]), item[0]))
        return cls(id, [AsyncResult(h.id, handle=h) for _, h in ordered])

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(r.id for r in self)}]>"


class EagerResult(AsyncResult):
    """A call that ran here (``apply()``, ``task_always_eager``)."""

    def __init__(self, id: Any, value: Any, state: str, traceback: str | None = None) -> None:
        super().__init__(id)
        self._value = value
        self._state = state
        self._traceback = traceback

    @property
    def state(self) -> str:
        return self._state

    status = state

    @property
    def result(self) -> Any:
        return self._value

    info = result

    @property
    def traceback(self) -> str | None:
        return self._traceback

    def get(self, timeout: float | None = None, propagate: bool = True,
            interval: float = 0.5, **ignored: Any) -> Any:  # fmt: skip
        if propagate and self._state in states.PROPAGATE_STATES:
            raise self._value
        return self._value

    wait = get

    def revoke(self, *args: Any, **kwargs: Any) -> None:
        self._state = states.REVOKED

    def __repr__(self) -> str:
        return f"<EagerResult: {self.id}>"


def materialize(shape: Any, found: dict[str, Any], *, group_id: Any = None,
                parent: Any = None) -> Any:  # fmt: skip
    """The result objects of a planned canvas (``canvas.Plan.result``): ``found`` maps
    step names to job ids (or to ready ``EagerResult`` objects)."""
    what, value = shape
    if what == "one":
        hit = found[value]
        return hit if isinstance(hit, AsyncResult) else AsyncResult(hit, parent=parent)
    if what == "group":
        return GroupResult(group_id, [materialize(r, found, group_id=group_id) for r in value])
    previous = parent
    for member in value:
        previous = materialize(member, found, group_id=group_id, parent=previous)
    return previous
