"""django_jobqueue: a durable background job queue in your Django project's database.

Everything public is re-exported here; other modules are internal.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from .backoff import Backoff
from .context import Context
from .errors import (
    ConfigurationError,
    DuplicateKind,
    EnqueueError,
    InvalidArguments,
    InvalidOption,
    InvalidPayload,
    InvalidTransition,
    JobNotFound,
    JobQueueError,
    MergeError,
    UnknownKind,
)
from .handle import JobHandle, Pending
from .outcomes import Merge, Pause, Permanent
from .states import Outcome, Priority, Status
from .task import Task, enqueue, enqueue_many, task

if TYPE_CHECKING:
    import uuid
    from datetime import datetime

    from .models import Job
    from .store import Page

__all__ = [
    "Backoff",
    "ConfigurationError",
    "Context",
    "DuplicateKind",
    "EnqueueError",
    "InvalidArguments",
    "InvalidOption",
    "InvalidPayload",
    "InvalidTransition",
    "JobHandle",
    "JobNotFound",
    "JobQueueError",
    "Merge",
    "MergeError",
    "Outcome",
    "Pause",
    "Pending",
    "Permanent",
    "Priority",
    "Status",
    "Task",
    "UnknownKind",
    "cancel",
    "cleanup",
    "enqueue",
    "enqueue_many",
    "history",
    "job",
    "pause_queue",
    "requeue",
    "resume_queue",
    "run_now",
    "stats",
    "task",
]


def cancel(job_id: uuid.UUID | str, *, actor: str = "") -> Job:
    """Cancel a pending job, or ask the worker running a claimed one to stop it."""
    from . import store

    return store.cancel(job_id=job_id, actor=actor)


def requeue(job_id: uuid.UUID | str, force: bool = False, *, actor: str = "") -> Job:
    """Send a dead or cancelled job (a completed one with ``force=True``) back to pending."""
    from . import store

    return store.requeue(job_id=job_id, force=force, actor=actor)


def run_now(job_id: uuid.UUID | str, *, actor: str = "") -> Job:
    """Make a pending job that is scheduled for later runnable now."""
    from . import store

    return store.run_now(job_id=job_id, actor=actor)


def pause_queue(name: str, *, actor: str = "") -> bool:
    """Stop workers claiming from queue ``name`` (by their next turn); enqueue goes on.

    Returns True if the queue was running until now.
    """
    from . import store

    return store.pause_queue(queue=name, actor=actor)


def resume_queue(name: str) -> bool:
    """Let workers claim from queue ``name`` again; True if it was paused."""
    from . import store

    return store.resume_queue(queue=name)


def job(job_id: uuid.UUID | str) -> JobHandle:
    """A handle on an existing job (``.status``, ``.result``, ``.journal()``)."""
    from . import store

    return JobHandle(store.get_job(job_id=job_id), "inserted")


def history(**filters: Any) -> Page:
    """A keyset page of jobs; see ``store.history`` for the filters."""
    from . import store

    return store.history(**filters)


def cleanup(
    finished_before: datetime,
    kind: str | None = None,
    status: str | None = None,
    *,
    dry_run: bool = False,
) -> int:
    """Delete finished jobs older than ``finished_before`` in short batches; returns the count.

    With ``dry_run``, only counts what would be deleted.
    """
    from . import store

    return store.cleanup(finished_before=finished_before, kind=kind, status=status, dry_run=dry_run)


def stats(window: timedelta = timedelta(hours=24)) -> dict[str, Any]:
    """A snapshot of backlog, claims, failures, workers and run statistics over ``window``."""
    from . import store

    return store.stats(window=window)
