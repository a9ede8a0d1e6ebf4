"""A Django ``TaskResult`` read from a job and its journal.

Status: pending is READY, claimed RUNNING, completed SUCCESSFUL, dead and cancelled
FAILED. Each run of the job is an attempt (one worker id each); each attempt that
failed is one ``TaskError``: the exception the task raised, ``LeaseExpired`` for an
attempt whose worker died, ``TimeoutError`` for one given up at the task's timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from django_jobqueue.backend.compat import Task, TaskError, TaskResult, TaskResultStatus
from django_jobqueue.states import Outcome, Status

if TYPE_CHECKING:
    from django_jobqueue.models import Job, JournalEntry
    from django_jobqueue.store import Claimed

P = ParamSpec("P")
R = TypeVar("R")

STATUSES: dict[str, TaskResultStatus] = {
    Status.PENDING: TaskResultStatus.READY,
    Status.CLAIMED: TaskResultStatus.RUNNING,
    Status.COMPLETED: TaskResultStatus.SUCCESSFUL,
    Status.DEAD: TaskResultStatus.FAILED,
    Status.CANCELLED: TaskResultStatus.FAILED,
}

# Journal outcomes that end a run (an attempt); an operator's cancel of a pending job,
# a requeue and a merge are not runs and carry no worker.
RUN_OUTCOMES = frozenset(
    {
        Outcome.COMPLETED,
        Outcome.PAUSED,
        Outcome.RETRIED,
        Outcome.DEAD,
        Outcome.STALE_RECOVERED,
        Outcome.RELEASED,
        Outcome.CANCELLED,
    }
)
FAILED_OUTCOMES = frozenset({Outcome.RETRIED, Outcome.DEAD, Outcome.STALE_RECOVERED})

# How the journal notes of a lost lease and of a run past its timeout begin.
LEASE_NOTE = "lease expired"
TIMEOUT_NOTE = "timed out after"

# What the runner attaches to the journal entry of a failed attempt.
ERROR_PATH = "exception_class_path"
ERROR_TRACEBACK = "traceback"


class LeaseExpired(Exception):
    """The worker running this attempt stopped renewing its lease (it died, or lost the
    database) and the lease ran out; the attempt counts as failed."""


def class_path(cls: type[BaseException]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def is_attempt(entry: JournalEntry) -> bool:
    return entry.outcome in RUN_OUTCOMES and bool(entry.worker)


def error_of(entry: JournalEntry) -> TaskError | None:
    """The TaskError of a failed attempt's journal entry; None for any other entry."""
    attached = entry.attachment if isinstance(entry.attachment, dict) else {}
    path = attached.get(ERROR_PATH)
    if isinstance(path, str):
        return TaskError(exception_class_path=path, traceback=str(attached.get(ERROR_TRACEBACK)))
    if entry.outcome not in FAILED_OUTCOMES or not entry.worker:
        return None
    # The worker's own endings, by the notes it writes for them (tests pin the wording).
    if entry.outcome == Outcome.STALE_RECOVERED or entry.note.startswith(LEASE_NOTE):
        cls: type[BaseException] = LeaseExpired
    elif entry.note.startswith(TIMEOUT_NOTE):
        cls = TimeoutError
    else:  # failed before the task's own code ran (its payload no longer fits it, say)
        cls = RuntimeError
    return TaskError(exception_class_path=class_path(cls), traceback=entry.note)


@dataclass(frozen=True, slots=True)
class JobView:
    """What a TaskResult is read from: a job row, or the job a worker just claimed."""

    id: uuid.UUID
    status: str
    queue: str
    payload: dict[str, Any]
    created_at: datetime | None
    claimed_by: str = ""
    claim_expires_at: datetime | None = None
    finished_at: datetime | None = None
    result: Any = None

    @classmethod
    def of_job(cls, job: Job) -> JobView:
        return cls(
            id=job.id,
            status=job.status,
            queue=job.queue,
            payload=job.payload if isinstance(job.payload, dict) else {},
            created_at=job.created_at,
            claimed_by=job.claimed_by,
            claim_expires_at=job.claim_expires_at,
            finished_at=job.finished_at,
            result=job.result,
        )

    @classmethod
    def of_claim(cls, job: Claimed) -> JobView:
        return cls(
            id=job.id,
            status=Status.CLAIMED,
            queue=job.queue,
            payload=job.payload,
            created_at=job.created_at,
            claimed_by=job.claimed_by,
            claim_expires_at=job.claim_expires_at,
        )


def build(
    *,
    job: JobView,
    entries: Sequence[JournalEntry],
    task: Task[P, R],
    running_since: datetime | None = None,
    lease: timedelta | None = None,
) -> TaskResult[P, R]:
    """The TaskResult of ``job`` (its journal ``entries``, oldest first).

    A claimed job's current attempt began at ``running_since`` when the caller knows
    it (the run itself); otherwise it is read off the lease: ``claim_expires_at``
    less ``lease``, the time of the claim or of the last lease extension.
    """
    attempts = [e for e in entries if is_attempt(e)]
    worker_ids = [e.worker for e in attempts]
    # An attempt lost with its worker has no recorded start.
    starts = [e.started_at for e in attempts if e.started_at is not None]
    if job.status == Status.CLAIMED:
        worker_ids.append(job.claimed_by)
        if running_since is None and job.claim_expires_at is not None and lease is not None:
            running_since = job.claim_expires_at - lease
        if running_since is not None:
            starts.append(running_since)
    result = TaskResult(
        task=task,
        id=str(job.id),
        status=STATUSES[job.status],
        enqueued_at=job.created_at,
        started_at=starts[0] if starts else None,
        last_attempted_at=starts[-1] if starts else None,
        finished_at=job.finished_at,
        args=list(job.payload.get("args") or []),
        kwargs=dict(job.payload.get("kwargs") or {}),
        backend=str(job.payload.get("backend") or task.backend),
        errors=[error for error in map(error_of, entries) if error is not None],
        worker_ids=worker_ids,
    )
    if job.status == Status.COMPLETED:
        set_fields(result, _return_value=job.result)
    return result


def set_fields(result: TaskResult[..., Any], **values: Any) -> None:
    """Change fields of a (frozen) TaskResult in place, as Django's own backends do."""
    for name, value in values.items():
        object.__setattr__(result, name, value)
