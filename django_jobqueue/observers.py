"""Observers of the queue (Sentry's SDK, OpenTelemetry's): what they are told, not what
decides a run. A call into one is ``guarded``: its failure is logged and dropped, so a
broken, misconfigured or changed SDK costs a report or a span, never a run's outcome,
an enqueue or the worker's loop (which ends every run's span as it settles).

A broken SDK fails at every call: each failure is a log line, its traceback only the
first time for each thing the SDK was doing, so the log says it every time without a
flood of tracebacks.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

logger = logging.getLogger("django_jobqueue")

T = TypeVar("T")

# (observer, what it was doing): logged with its traceback once.
_told: set[tuple[str, str]] = set()


@contextlib.contextmanager
def guarded(observer: str, what: str) -> Iterator[None]:
    """Where ``observer`` is called (``what`` it is doing): its failure is logged, once
    with its traceback, and dropped."""
    try:
        yield
    except Exception:
        first = (observer, what) not in _told
        _told.add((observer, what))
        logger.warning(
            "%s: %s failed; the queue goes on without it", observer, what, exc_info=first
        )


@contextlib.contextmanager
def observed(
    observer: str, what: str, opened: Callable[[], AbstractContextManager[T]]
) -> Iterator[T | None]:
    """The context ``opened()`` makes (a run's scope, a span made current), entered and
    left under ``guarded``: None inside when the observer failed to open it. The code
    inside runs either way, and its own exceptions pass through untouched (an observer
    that fails closing, or would swallow one, changes nothing)."""
    entered: AbstractContextManager[T] | None = None
    value: T | None = None
    with guarded(observer, f"opening {what}"):
        context = opened()
        value = context.__enter__()
        entered = context
    try:
        yield value
    except BaseException as exc:
        if entered is not None:
            with guarded(observer, f"closing {what}"):
                entered.__exit__(type(exc), exc, exc.__traceback__)
        raise
    if entered is not None:
        with guarded(observer, f"closing {what}"):
            entered.__exit__(None, None, None)
