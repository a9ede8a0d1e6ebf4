"""A Celery-compatible surface over the queue: moving a Celery module means changing
its imports (``from celery import shared_task`` becomes ``from
django_jobqueue.contrib.celery import shared_task``). See docs/howto/from-celery.md.

Celery itself is not needed (nor imported). Names are loaded on first use (PEP 562),
so a project's ``celery.py`` may import them before Django's apps are loaded.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django_jobqueue.contrib.celery.app import Celery, current_app, shared_task
    from django_jobqueue.contrib.celery.canvas import (
        Signature,
        chain,
        chord,
        chunks,
        group,
        signature,
        starmap,
        xmap,
    )
    from django_jobqueue.contrib.celery.exceptions import Retry
    from django_jobqueue.contrib.celery.result import AsyncResult, GroupResult
    from django_jobqueue.contrib.celery.schedules import crontab, schedule
    from django_jobqueue.contrib.celery.task import Task

_WHERE = {
    "Celery": "app",
    "current_app": "app",
    "shared_task": "app",
    "Signature": "canvas",
    "chain": "canvas",
    "chord": "canvas",
    "chunks": "canvas",
    "group": "canvas",
    "signature": "canvas",
    "starmap": "canvas",
    "xmap": "canvas",
    "Retry": "exceptions",
    "AsyncResult": "result",
    "GroupResult": "result",
    "crontab": "schedules",
    "schedule": "schedules",
    "Task": "task",
}
_MODULES = ("states", "exceptions", "result", "schedules", "canvas")

__all__ = [
    "AsyncResult",
    "Celery",
    "GroupResult",
    "Retry",
    "Signature",
    "Task",
    "canvas",
    "chain",
    "chord",
    "chunks",
    "crontab",
    "current_app",
    "exceptions",
    "group",
    "result",
    "schedule",
    "schedules",
    "shared_task",
    "signature",
    "starmap",
    "states",
    "xmap",
]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return import_module(f"{__name__}.{name}")
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_WHERE[name]}"), name)
    if name == "current_app":
        value = value()
    return value


def __dir__() -> list[str]:
    return __all__
