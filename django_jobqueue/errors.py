"""Typed exceptions of django_jobqueue.

Each class's docstring is its default message; subclasses carry the facts a caller
needs (kind, job id, argument, setting key). Task control signals (``Pause``,
``Permanent``) live in :mod:`django_jobqueue.rules.control`: they are not errors of ours.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured


class JobQueueError(Exception):
    """A django_jobqueue operation failed."""

    # The facts an error may carry; each is None unless the raiser knew it, so a
    # handler can read any of them on any error.
    kind: str | None = None
    job_id: Any = None
    argument: str | None = None
    option: str | None = None
    key: str | None = None
    index: int | None = None
    status: str | None = None
    workflow_id: Any = None

    def __init__(self, message: str | None = None, **facts: Any) -> None:
        self.facts = facts
        for name, value in facts.items():
            setattr(self, name, value)
        super().__init__(message or (self.__doc__ or "").strip())


class ConfigurationError(JobQueueError, ImproperlyConfigured):
    """settings.JOBQUEUE is invalid."""


class DuplicateKind(JobQueueError, ImproperlyConfigured):
    """Two different tasks claim the same kind."""


class EnqueueError(JobQueueError, ValueError):
    """The job could not be enqueued; nothing was written."""


class UnknownKind(EnqueueError, LookupError):
    """No task is registered under this kind."""


class InvalidArguments(EnqueueError, TypeError):
    """The arguments do not match the task's signature."""


class InvalidPayload(EnqueueError, TypeError):
    """An argument is not JSON-serialisable."""


class InvalidOption(EnqueueError):
    """An enqueue option (priority, delay, run_at, queue, key) is out of range."""


class MergeError(EnqueueError):
    """The task's merge() failed or returned something that is not a Merge decision."""


class RateLimited(EnqueueError):
    """The kind's enqueue rate limit is used up; nothing was written."""

    rate: str | None = None  # the limit, as written ("100/s")
    retry_after: float | None = None  # seconds until enough tokens are back (None: never)


class KeyContended(EnqueueError, RuntimeError):
    """The idempotency key kept changing hands while enqueueing (its holder finished and
    another took it, again and again); nothing was written: try again.

    A RuntimeError too, as this raised one before it had a type of its own.
    """


class WorkflowError(EnqueueError):
    """The workflow is not one that can be enqueued; nothing of it was written.
    ``step`` names the step at fault, where there is one."""

    step: str | None = None


class EmptyWorkflow(WorkflowError):
    """A workflow, group, chord or batch with no step (no member) has nothing to run."""


class DuplicateStep(WorkflowError):
    """Two steps of one workflow have the same name."""


class UnknownStep(WorkflowError, LookupError):
    """``after`` names no step of this workflow (an unknown name, or a step of another)."""


class WorkflowCycle(WorkflowError):
    """The steps' ``after`` lists form a circle: none of them could ever run."""


class InvalidJoin(WorkflowError):
    """``when`` is not one of the joins a step can wait for."""


class WorkflowNotFound(JobQueueError, LookupError):
    """No workflow has this id."""


class WorkflowResultError(JobQueueError, RuntimeError):
    """The workflow has no result to give (``WorkflowHandle.result``)."""


class WorkflowNotFinished(WorkflowResultError):
    """The workflow is still running: its result is not there yet (``wait()`` for it)."""


class WorkflowFailed(WorkflowResultError):
    """The workflow failed (a step died) or was cancelled, so it has no result;
    ``status`` is the workflow's and ``steps`` names its dead or cancelled steps."""

    steps: list[str] | None = None


class NoWorkflowOutput(WorkflowResultError):
    """The workflow declares no output step (``Workflow(..., output=...)``): there is no
    one result to give; each step's result is on ``WorkflowHandle.steps``."""


class InvalidFilter(JobQueueError, ValueError):
    """A filter of history(), cleanup() or throughput() is invalid; nothing was read or
    deleted. ``argument`` names the filter.

    A ValueError too, as these raised one before they had a type of their own.
    """


class UnknownFilter(InvalidFilter, TypeError):
    """history() was given a filter it does not know.

    A TypeError too (as an unexpected keyword argument is), as it raised one before.
    """


class InvalidLimit(JobQueueError, ValueError):
    """A limit (max_in_flight, rate_limit) is out of range or names no known kind."""


class QueueDatabaseUnavailable(JobQueueError, ConnectionError):
    """A queue database cannot be reached (the message names its alias); nothing was
    written to it. The other queue databases are not affected."""


class JobNotFound(JobQueueError, LookupError):
    """No job has this id."""


class InvalidTransition(JobQueueError, ValueError):
    """The job is not in a state that allows this operation."""


class ClaimLost(JobQueueError):
    """This run no longer holds its job's claim (its lease ran out and another worker took
    the job, or it was released): its settlement was refused, and the transaction it was
    written in must roll back."""


class SettleError(JobQueueError, RuntimeError):
    """ctx.settle_now() cannot settle this run here."""


class InvalidProgress(JobQueueError, ValueError):
    """ctx.progress() was given a value it cannot record (``argument`` names it); the
    progress reported before stays."""


class StepError(JobQueueError, RuntimeError):
    """ctx.step(), ctx.sleep() or ctx.wait_for() cannot be used here (outside a running
    job, in an async task, inside another step, or a step name used twice in one run)."""


class StepDivergence(StepError):
    """A replay met a different sequence of durable steps than the job recorded (a deploy
    reordered, renamed, inserted or removed steps, or changed a step's ``version=``):
    running on would return one step's record for another or repeat a side effect. The
    run settles its job dead with this as its error (docs/howto/durable-steps.md).

    ``step`` names the step the replay stopped at; ``recorded`` is the job's recorded
    sequence and ``current`` this run's, each a list of step names in order."""

    step: str | None = None
    recorded: list[str] | None = None
    current: list[str] | None = None


class ChildFailed(JobQueueError):
    """A child workflow (or job) a durable step awaited (``ctx.step_workflow``) did not
    complete: one of its steps died or was cancelled. Raised by the parent's step on
    this run and every replay (the outcome is recorded); catch it to carry on.

    ``workflow_id`` is the child workflow's id, ``child_job_id`` the job that failed,
    ``step`` its step name, ``status`` its status (``dead`` or ``cancelled``) and
    ``error`` the note of its last journal entry (its exception, or why it was
    cancelled)."""

    child_job_id: Any = None
    step: str | None = None
    error: str | None = None


class ChildDepthExceeded(StepError):
    """``ctx.step_workflow`` was called from a job that is itself a child at the
    deepest level MAX_CHILD_DEPTH allows: nothing was enqueued, and the job settles
    dead (a retry would meet the same depth)."""

    depth: int | None = None


class InvalidStep(JobQueueError, ValueError):
    """A durable step was given a value it cannot record (``argument`` names it):
    nothing was recorded."""


class InvalidStreamItem(JobQueueError, ValueError):
    """ctx.stream.write() was given a value it cannot store (not JSON, or over
    MAX_OUTPUT_BYTES); nothing was written."""


class StreamFull(JobQueueError, RuntimeError):
    """The job's stream holds MAX_STREAM_ITEMS items or MAX_STREAM_BYTES of JSON: the
    write would go past it, and nothing of it was written."""


class InvalidEvent(JobQueueError, ValueError):
    """emit() or ctx.wait_for() was given a name, key or payload it cannot store
    (``argument`` names it); nothing was written."""


class InvalidMarker(JobQueueError, ValueError):
    """mark() was given a label or author it cannot store (``argument`` names it);
    nothing was written."""


class PartitionError(JobQueueError, RuntimeError):
    """The journal's partitions could not be changed as asked (the database has none, the
    journal is not, or is already, partitioned, or a period or date is wrong); the message
    says which, and nothing was changed."""
