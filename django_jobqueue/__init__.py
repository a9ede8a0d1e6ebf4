"""django_jobqueue: a durable background job queue in your Django project's database.

Everything public is re-exported here; other modules are internal. The vocabulary (the
errors, statuses, outcomes, priorities, signals, control exceptions) is imported with
the package; the rest of the API (tasks, enqueue, workflows, the operations) is loaded
on first use (PEP 562's ``__getattr__``), so that importing the package, from a
settings file or an app config, reads no model and imports no store, and the modules
behind it may import the store at their top.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from django_jobqueue.errors import (
    ChildDepthExceeded,
    ChildFailed,
    ClaimLost,
    ConfigurationError,
    DuplicateKind,
    DuplicateStep,
    EmptyWorkflow,
    EnqueueError,
    InvalidArguments,
    InvalidEvent,
    InvalidFilter,
    InvalidJoin,
    InvalidLimit,
    InvalidMarker,
    InvalidOption,
    InvalidPayload,
    InvalidProgress,
    InvalidStep,
    InvalidStreamItem,
    InvalidTransition,
    JobNotFound,
    JobQueueError,
    KeyContended,
    MergeError,
    NoWorkflowOutput,
    RateLimited,
    SettleError,
    StepDivergence,
    StepError,
    StreamFull,
    UnknownFilter,
    UnknownKind,
    UnknownStep,
    WorkflowCycle,
    WorkflowError,
    WorkflowFailed,
    WorkflowNotFinished,
    WorkflowNotFound,
    WorkflowResultError,
)
from django_jobqueue.progress import Progress
from django_jobqueue.rules.backoff import Backoff
from django_jobqueue.rules.control import Pause, Permanent, SoftTimeLimitExceeded
from django_jobqueue.signals import job_enqueued, job_finished, job_started
from django_jobqueue.states import Outcome, Priority, Status

# The names loaded on first use, each with its module.
_LAZY: dict[str, str] = {
    "Context": "django_jobqueue.run.context",
    "Task": "django_jobqueue.task.classes",
    "enqueue_many": "django_jobqueue.task.classes",
    "task": "django_jobqueue.task.functions",
    "enqueue": "django_jobqueue.task.enqueue",
    "Explanation": "django_jobqueue.task.explain",
    "Why": "django_jobqueue.task.explain",
    "HistoryPage": "django_jobqueue.task.handle",
    "JobHandle": "django_jobqueue.task.handle",
    "Merge": "django_jobqueue.task.merge",
    "Pending": "django_jobqueue.task.merge",
    "periodic": "django_jobqueue.task.periodic",
    "Signature": "django_jobqueue.task.signature",
    "Stream": "django_jobqueue.task.streaming",
    "StreamItem": "django_jobqueue.task.streaming",
    **dict.fromkeys(
        ["Batch", "Workflow", "WorkflowHandle", "chain", "chord", "group", "workflow"],
        "django_jobqueue.workflows",
    ),
    **dict.fromkeys(
        [
            "cancel",
            "cleanup",
            "clear_limit",
            "emit",
            "history",
            "job",
            "limits",
            "mark",
            "pause_queue",
            "requeue",
            "resume_queue",
            "run_now",
            "set_limit",
            "stats",
        ],
        "django_jobqueue.operations",
    ),
}

if TYPE_CHECKING:  # what ``_LAZY`` loads, for type checkers (a test holds the two equal)
    from django_jobqueue.operations import (
        cancel,
        cleanup,
        clear_limit,
        emit,
        history,
        job,
        limits,
        mark,
        pause_queue,
        requeue,
        resume_queue,
        run_now,
        set_limit,
        stats,
    )
    from django_jobqueue.run.context import Context
    from django_jobqueue.task.classes import Task, enqueue_many
    from django_jobqueue.task.enqueue import enqueue
    from django_jobqueue.task.explain import Explanation, Why
    from django_jobqueue.task.functions import task
    from django_jobqueue.task.handle import HistoryPage, JobHandle
    from django_jobqueue.task.merge import Merge, Pending
    from django_jobqueue.task.periodic import periodic
    from django_jobqueue.task.signature import Signature
    from django_jobqueue.task.streaming import Stream, StreamItem
    from django_jobqueue.workflows import (
        Batch,
        Workflow,
        WorkflowHandle,
        chain,
        chord,
        group,
        workflow,
    )


# ``task`` names both the decorator and the subpackage that defines it. Importing the
# subpackage (light: its own ``__init__`` is empty) binds its module to the name; drop it,
# so that ``django_jobqueue.task`` comes through ``__getattr__`` as the decorator.
import_module("django_jobqueue.task")
globals().pop("task", None)


def __getattr__(name: str) -> Any:
    """Load a lazily exported name from its module, once."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'django_jobqueue' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


try:
    # The one source of the version is pyproject.toml; an installed copy (a wheel, or an
    # editable install of a checkout) carries it in its metadata.
    __version__ = version("django-jobqueue")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Backoff",
    "Batch",
    "ChildDepthExceeded",
    "ChildFailed",
    "ClaimLost",
    "ConfigurationError",
    "Context",
    "DuplicateKind",
    "DuplicateStep",
    "EmptyWorkflow",
    "EnqueueError",
    "Explanation",
    "HistoryPage",
    "InvalidArguments",
    "InvalidEvent",
    "InvalidFilter",
    "InvalidJoin",
    "InvalidLimit",
    "InvalidMarker",
    "InvalidOption",
    "InvalidPayload",
    "InvalidProgress",
    "InvalidStep",
    "InvalidStreamItem",
    "InvalidTransition",
    "JobHandle",
    "JobNotFound",
    "JobQueueError",
    "KeyContended",
    "Merge",
    "MergeError",
    "NoWorkflowOutput",
    "Outcome",
    "Pause",
    "Pending",
    "Permanent",
    "Priority",
    "Progress",
    "RateLimited",
    "SettleError",
    "Signature",
    "SoftTimeLimitExceeded",
    "Status",
    "StepDivergence",
    "StepError",
    "Stream",
    "StreamFull",
    "StreamItem",
    "Task",
    "UnknownFilter",
    "UnknownKind",
    "UnknownStep",
    "Why",
    "Workflow",
    "WorkflowCycle",
    "WorkflowError",
    "WorkflowFailed",
    "WorkflowHandle",
    "WorkflowNotFinished",
    "WorkflowNotFound",
    "WorkflowResultError",
    "cancel",
    "chain",
    "chord",
    "cleanup",
    "clear_limit",
    "emit",
    "enqueue",
    "enqueue_many",
    "group",
    "history",
    "job",
    "job_enqueued",
    "job_finished",
    "job_started",
    "limits",
    "mark",
    "pause_queue",
    "periodic",
    "requeue",
    "resume_queue",
    "run_now",
    "set_limit",
    "stats",
    "task",
    "workflow",
]
