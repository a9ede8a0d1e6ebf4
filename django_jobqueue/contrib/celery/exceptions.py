"""Celery's exceptions, by the names Celery code catches and raises
(``from celery.exceptions import Retry`` becomes ``from
django_jobqueue.contrib.celery.exceptions import Retry``)."""

from __future__ import annotations

from datetime import timedelta

from django_jobqueue.errors import InvalidOption


class CeleryError(Exception):
    """Base of the Celery-compatible exceptions."""


class Retry(CeleryError):
    """Raised by ``self.retry()``: this run failed and the task is to run again after
    ``when`` (a delay). ``exc`` is the exception that caused it, if any."""

    def __init__(
        self, message: str | None = None, exc: BaseException | None = None, when: object = None
    ) -> None:
        self.message = message
        self.exc = exc
        self.when = when
        super().__init__(message or f"Retry in {when}" + (f": {exc!r}" if exc else ""))

    @property
    def delay(self) -> timedelta:
        when = self.when
        if isinstance(when, timedelta):
            return when
        return timedelta(seconds=float(when or 0))  # type: ignore[arg-type]


class MaxRetriesExceededError(CeleryError):
    """``self.retry()`` was called after the task's ``max_retries`` retries."""


class Ignore(CeleryError):
    """Raised by a task to end its run without a state change; here the job completes
    with no result (Celery leaves its state as it was)."""


class Reject(CeleryError):
    """Raised by a task to reject its message; here the job goes dead (Celery would
    requeue it with ``requeue=True``: raise ``self.retry()`` instead)."""

    def __init__(self, reason: object = None, requeue: bool = False) -> None:
        self.reason = reason
        self.requeue = requeue
        super().__init__(reason, requeue)


class SoftTimeLimitExceeded(CeleryError):
    """A run passed its soft time limit (raised inside the task by the process pool)."""


class TimeLimitExceeded(CeleryError):
    """A run passed its hard time limit."""


class TaskRevokedError(CeleryError):
    """The task was revoked (its job cancelled) before it finished."""


class TaskFailed(CeleryError):
    """What ``AsyncResult.get()`` raises for a failed task: the job's journal keeps the
    exception's type and message as text, never the object (payloads and results are
    JSON, nothing is unpickled). ``exc_type`` and ``message`` are those texts."""

    def __init__(self, exc_type: str, message: str, traceback: str = "") -> None:
        self.exc_type = exc_type
        self.message = message
        self.traceback = traceback
        super().__init__(f"{exc_type}: {message}" if exc_type else message)


class Unsupported(InvalidOption):
    """A Celery option or feature this queue does not map: the message names it and
    the alternative."""


class DifferentHere(UserWarning):
    """A Celery option accepted with a different meaning here (the message says which)."""
