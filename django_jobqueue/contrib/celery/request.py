"""``self.request``: what a Celery-style task knows of the call it is running, kept per
thread (a task called inside another sees its own)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    """Celery's request fields that map: ``id`` is the job's id (None for a direct
    call), ``retries`` its failures so far, ``delivery_info`` its queue and priority."""

    id: str | None = None
    retries: int = 0
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    called_directly: bool = True
    is_eager: bool = False
    delivery_info: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, Any] = field(default_factory=dict)
    eta: str | None = None
    expires: str | None = None
    hostname: str | None = None
    task: str | None = None
    group: str | None = None
    root_id: str | None = None
    parent_id: str | None = None
    # The run's ``Context`` on a worker (None eagerly and for a direct call).
    ctx: Any = field(default=None, repr=False)

    @property
    def correlation_id(self) -> str | None:
        return self.id

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)


_local = threading.local()


def current() -> Request:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else Request()


@contextlib.contextmanager
def pushed(request: Request) -> Iterator[Request]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(request)
    try:
        yield request
    finally:
        stack.pop()
