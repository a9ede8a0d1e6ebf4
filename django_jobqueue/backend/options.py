"""The backend's task class and options: retries per task and per backend, priority tiers.

Retries follow Django's open proposal for Tasks (django/new-features#142): a task
runs at most ``max_attempts`` times, and ``backoff(exception, task_result)`` returns
the seconds to wait before the next attempt, or ``None`` to stop retrying.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from django_jobqueue import validation
from django_jobqueue.backend.compat import InvalidTask, InvalidTaskBackend, Task
from django_jobqueue.states import Priority

if TYPE_CHECKING:
    from django_jobqueue.backend.compat import TaskResult

Backoff = Callable[[BaseException, "TaskResult[..., Any]"], "float | None"]


# A dataclass like its base; the slots and frozenness follow Django's own Task.
@dataclass(frozen=True, slots=True, kw_only=True)
class JobQueueTask(Task):  # type: ignore[type-arg]  # generic over the function's signature
    """Django's ``Task`` plus this backend's retry options, given to ``@task``::

        @task(max_attempts=5, backoff=lambda exc, result: 30)
        def sync_account(account_id): ...

    ``max_attempts``: how many times the task may run before it fails for good (failures
    counted, a lost worker's attempt included); ``None`` takes the backend's
    ``MAX_ATTEMPTS`` option. ``backoff(exception, task_result)``: seconds to wait before
    the next attempt, or ``None`` to stop retrying; ``None`` takes the backend's
    ``BACKOFF`` option. ``lease``: how long a worker holds the task before another may
    take it over if the first stops renewing it (died); ``None`` takes JOBQUEUE's
    ``LEASE``. ``timeout``: an attempt running longer fails (and is retried like any
    failure); ``None``: no limit. ``using()`` changes none of them.
    """

    max_attempts: int | None = None
    backoff: Backoff | None = None
    lease: timedelta | None = None
    timeout: timedelta | None = None


def check_retry_options(task: Task[..., Any]) -> None:
    """Raise InvalidTask unless a JobQueueTask's retry options are usable."""
    if not isinstance(task, JobQueueTask):
        return
    validation.positive_int(
        task.max_attempts, name="max_attempts", error=InvalidTask, allow_none=True
    )
    if task.backoff is not None and not callable(task.backoff):
        raise InvalidTask(f"backoff must be a callable, got {task.backoff!r}")
    for name in ("lease", "timeout"):
        value = getattr(task, name)
        if value is not None and not isinstance(value, timedelta):
            raise InvalidTask(f"{name} must be a timedelta, got {value!r}")
        if value is not None:
            validation.duration(value, name=name, error=InvalidTask, allow_zero=False)


@dataclass(frozen=True)
class BackendOptions:
    """``TASKS[alias]["OPTIONS"]``, validated."""

    max_attempts: int | None  # None: JOBQUEUE's MAX_FAILURES
    backoff: Backoff | None  # None: JOBQUEUE's backoff curve

    KNOWN = ("BACKOFF", "MAX_ATTEMPTS")

    @classmethod
    def parse(cls, alias: str, raw: Mapping[str, Any]) -> BackendOptions:
        if not isinstance(raw, Mapping):
            raise InvalidTaskBackend(f"TASKS[{alias!r}]['OPTIONS'] must be a dict, got {raw!r}")
        unknown = sorted(set(raw) - set(cls.KNOWN))
        if unknown:
            raise InvalidTaskBackend(
                f"Unknown OPTIONS key(s) for TASKS[{alias!r}]: {', '.join(unknown)}. "
                f"Known keys: {', '.join(cls.KNOWN)}"
            )
        max_attempts = validation.positive_int(
            raw.get("MAX_ATTEMPTS"),
            name=f"TASKS[{alias!r}]['OPTIONS']['MAX_ATTEMPTS']",
            error=InvalidTaskBackend,
            allow_none=True,
        )
        backoff = raw.get("BACKOFF")
        if isinstance(backoff, str):
            try:
                backoff = import_string(backoff)
            except ImportError as exc:
                raise InvalidTaskBackend(
                    f"TASKS[{alias!r}]['OPTIONS']['BACKOFF']: cannot import {backoff!r} ({exc})"
                ) from exc
        if backoff is not None and not callable(backoff):
            raise InvalidTaskBackend(
                f"TASKS[{alias!r}]['OPTIONS']['BACKOFF'] must be a callable or its dotted "
                f"path, got {backoff!r}"
            )
        return cls(max_attempts=max_attempts, backoff=backoff)


def tier(priority: int) -> int:
    """Django's priority (-100..100, higher runs first) as one of the queue's three tiers:
    above 0 is HIGH, 0 (Django's default) NORMAL, below 0 LOW."""
    if priority > 0:
        return Priority.HIGH
    if priority < 0:
        return Priority.LOW
    return Priority.NORMAL
