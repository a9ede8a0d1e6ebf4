"""Helpers for the Django Tasks backend tests: signals seen, and a result reduced to what
two backends must agree on."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django_jobqueue.backend.compat import (
    TaskResult,
    TaskResultStatus,
    task_enqueued,
    task_finished,
    task_started,
)

SIGNALS = {"enqueued": task_enqueued, "started": task_started, "finished": task_finished}


@dataclass
class SignalLog:
    """Each task signal received: (name, sender, result id, status, exception being handled)."""

    events: list[tuple[str, type, str, str, type | None]] = field(default_factory=list)

    def of(self, result_id: str) -> list[tuple[str, str, type | None]]:
        """The signals for one result, without the sender: (name, status, exception)."""
        return [(n, status, exc) for n, _, rid, status, exc in self.events if rid == result_id]

    def senders(self, result_id: str) -> set[type]:
        return {sender for _, sender, rid, _, _ in self.events if rid == result_id}


@contextmanager
def capture_signals() -> Iterator[SignalLog]:
    log = SignalLog()
    receivers = {}
    for name, signal in SIGNALS.items():

        def receiver(sender: type, task_result: TaskResult, name: str = name, **_: Any) -> None:
            log.events.append(
                (name, sender, task_result.id, str(task_result.status), sys.exc_info()[0])
            )

        receivers[name] = receiver
        signal.connect(receiver, weak=False)
    try:
        yield log
    finally:
        for name, signal in SIGNALS.items():
            signal.disconnect(receivers[name])


def summary(result: TaskResult) -> dict[str, Any]:
    """What the shared suite compares between ImmediateBackend and JobQueueBackend."""
    successful = result.status == TaskResultStatus.SUCCESSFUL
    return {
        "status": str(result.status),
        "return_value": result.return_value if successful else None,
        "args": result.args,
        "kwargs": result.kwargs,
        "errors": [error.exception_class for error in result.errors],
        "tracebacks_name_the_error": all(
            error.exception_class.__name__ in error.traceback for error in result.errors
        ),
        "attempts": result.attempts,
        "finished": result.is_finished,
        "enqueued": result.enqueued_at is not None,
        "started": result.started_at is not None,
        "finished_at": result.finished_at is not None,
        "func": result.task.func,
        "priority": result.task.priority,
        "queue_name": result.task.queue_name,
        "takes_context": result.task.takes_context,
    }
