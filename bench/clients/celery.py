"""Celery's enqueue side: ``task.delay()`` over its Redis broker. Each call that starts
a measure before its workers do empties the peer's Redis database first (the harness's
fresh PostgreSQL database is unused by Celery)."""

from __future__ import annotations

from bench.celeryapp import client as redis_client
from bench.celeryapp import noop, stamp
from bench.clients import paced, timed_calls


def _fresh() -> None:
    redis_client().flushdb()


def install() -> None:
    _fresh()


def enqueue_each(n: int) -> float:
    """``noop.delay()`` ``n`` times, each one message published to Redis."""
    _fresh()
    return timed_calls(noop.delay, n)


def enqueue_bulk(n: int) -> float:
    raise NotImplementedError("Celery has no bulk enqueue")


def preload(n: int) -> None:
    _fresh()
    for _ in range(n):
        noop.delay()


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    # No flush: the workers are running, and their queue's binding lives in Redis.
    def submit(label: str) -> None:
        stamp.delay(label)

    return paced(count, gap, warmup, submit)
