"""How a task steers its run: the ``Pause``, ``Permanent`` and ``RetryAfter`` signals.

These are control flow raised or returned by task code, not errors of ours.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django_jobqueue import validation

if TYPE_CHECKING:
    pass


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


class SoftTimeLimitExceeded(Exception):
    """The run passed its task's ``soft_time_limit``: raised inside the task (on the
    process pool, in its child process's main thread) so that it can clean up before
    its ``time_limit`` kills the process. Not caught, it fails the run like any error."""


class Parked(BaseException):
    """Ends a run whose job a sleep or a wait parked (its settlement already written).

    A BaseException, so that a task's ``except Exception`` cannot swallow it and run on
    past a settlement that is already written."""

    def __init__(self, note: str) -> None:
        self.note = note
        super().__init__(note)
