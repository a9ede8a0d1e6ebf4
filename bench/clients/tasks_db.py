"""django-tasks-db's enqueue side (Django set up with settings_tasksdb, autocommit).

It has no bulk enqueue; the untimed preload writes its rows with ``bulk_create``,
filled in as its backend's ``enqueue`` fills them.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.management import call_command
from django_tasks_db.models import DBTaskResult, get_date_max

from bench.clients import paced, per_request, timed_calls
from bench.tasksdbapp.tasks import noop, stamp


def install() -> None:
    call_command("migrate", verbosity=0, interactive=False)


def enqueue_each(n: int) -> float:
    """``noop.enqueue()`` ``n`` times, each call its own transaction."""
    return timed_calls(noop.enqueue, n)


def enqueue_requests(n: int) -> float:
    """``noop.enqueue()`` once per simulated request (``per_request``)."""
    return per_request(noop.enqueue, n)


def enqueue_bulk(n: int) -> float:
    raise NotImplementedError("django-tasks-db has no bulk enqueue")


def preload(n: int) -> None:
    rows: list[DBTaskResult[Any, Any]] = [
        DBTaskResult(
            id=uuid.uuid4(),
            args_kwargs={"args": [], "kwargs": {}},
            priority=noop.priority,
            task_path=noop.module_path,
            queue_name=noop.queue_name,
            run_after=get_date_max(),  # what its pre_save handler stores for "now"
            backend_name=noop.backend,
        )
        for _ in range(n)
    ]
    DBTaskResult.objects.bulk_create(rows, batch_size=5000)


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    def submit(label: str) -> None:
        stamp.enqueue(label=label)

    return paced(count, gap, warmup, submit)
