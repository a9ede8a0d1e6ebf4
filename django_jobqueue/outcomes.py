"""How a task steers its job: ``Pause`` and ``Permanent`` signals, and ``Merge`` decisions.

These are control flow raised or returned by task code, not errors of ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, get_args

from . import validation

if TYPE_CHECKING:
    from .task import Task


class TaskSignal(Exception):
    """Base of the signals a task raises to choose its job's next state."""


class Pause(TaskSignal):
    """Stop this run and come back later: the job goes back to pending, carry kept, no failure."""

    def __init__(self, resume_in: timedelta | float = timedelta(0), note: str = "") -> None:
        self.resume_in = validation.duration(resume_in, name="Pause resume_in", error=ValueError)
        self.note = note
        super().__init__(note or f"paused for {resume_in}")


class Permanent(TaskSignal):
    """This job can never succeed: it goes dead at once, without more retries."""

    def __init__(self, reason: str = "") -> None:
        self.reason = reason
        super().__init__(reason or "permanent failure")


class RetryAfter(TaskSignal):
    """This run failed (the exception is ``__cause__``); ``delay`` chooses the retry.

    Raised ``from`` the task's own exception by code that decides its retries itself
    (the Django Tasks backend's ``backoff``): ``delay`` replaces the kind's backoff
    curve for this one retry, ``None`` stops retrying (the job goes dead). The failure
    is counted and ``max_failures`` still applies.
    """

    def __init__(self, delay: timedelta | None) -> None:
        if delay is not None and delay < timedelta(0):
            raise ValueError(f"RetryAfter delay must not be negative, got {delay}")
        self.delay = delay
        super().__init__("no retry" if delay is None else f"retry in {delay}")


MergeAction = Literal["keep", "replace", "with", "independent"]


@dataclass(frozen=True)
class Merge:
    """What to do with an incoming task whose dedup key matches a pending job."""

    action: MergeAction
    task: Task | None = None
    carry: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action not in get_args(MergeAction):
            raise ValueError(
                f"Merge action must be one of {', '.join(get_args(MergeAction))}, got "
                f"{self.action!r}: build one with Merge.keep(), replace(), with_() or independent()"
            )

    @classmethod
    def keep(cls) -> Merge:
        """Keep the pending job as it is; drop the incoming task."""
        return cls("keep")

    @classmethod
    def replace(cls) -> Merge:
        """Overwrite the pending job's payload with the incoming task's; carry starts afresh."""
        return cls("replace")

    @classmethod
    def with_(cls, task: Task, *, carry: dict[str, Any] | None = None) -> Merge:
        """Give the pending job a computed payload (and carry, if given)."""
        return cls("with", task=task, carry=carry)

    @classmethod
    def independent(cls) -> Merge:
        """Do not merge: insert the incoming task as a job of its own."""
        return cls("independent")
