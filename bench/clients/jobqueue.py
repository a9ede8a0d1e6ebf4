"""django_jobqueue's enqueue side (Django set up with settings_jobqueue, autocommit)."""

from __future__ import annotations

import time

from django.core.management import call_command

from bench.benchapp.tasks import noop, stamp
from bench.clients import WARMUP, paced, timed_calls


def install() -> None:
    call_command("migrate", verbosity=0, interactive=False)


def enqueue_each(n: int) -> float:
    """``noop.enqueue()`` ``n`` times, each call its own transaction."""
    return timed_calls(noop.enqueue, n)


def enqueue_bulk(n: int) -> float:
    """One ``enqueue_many`` call of ``n`` jobs."""
    noop.enqueue_many([{} for _ in range(WARMUP)])
    items: list[dict[str, object]] = [{} for _ in range(n)]
    start = time.perf_counter()
    noop.enqueue_many(items)
    return time.perf_counter() - start


def preload(n: int) -> None:
    """``n`` no-op jobs before a drain, by the fastest path: one ``enqueue_many``."""
    noop.enqueue_many([{} for _ in range(n)])


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    def submit(label: str) -> None:
        stamp.enqueue(label=label)

    return paced(count, gap, warmup, submit)
