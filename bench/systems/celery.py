"""Celery 5 with Redis as its broker, prefork at its defaults: ``celery -A
bench.celeryapp worker`` processes; jobs counted in Redis (``bench.celeryapp``)."""

from __future__ import annotations

import os
import sys
from typing import Any

from bench.pg import Conn
from bench.phases import Settlements
from bench.systems.base import System

URL = os.environ.get("BENCH_CELERY_REDIS", "redis://127.0.0.1:6379/13")


def _redis() -> Any:
    import redis  # the bench extra's; imported by this peer alone

    return redis.Redis.from_url(URL)


class CeleryRedis(System):
    key = "celery"
    slug = "celery"
    aliases = ("celery-redis",)
    packages = ("celery", "kombu", "redis")
    uses_postgres = False

    def worker_argv(self, concurrency: int) -> list[str]:
        # Celery's defaults: prefork with as many children as CPUs, prefetch 4 a child,
        # early acknowledgement; our --concurrency has no equivalent to map.
        return [sys.executable, "-m", "celery", "-A", "bench.celeryapp", "worker", "-l", "WARNING"]

    def worker_note(self, concurrency: int) -> str:
        return (
            "python -m celery -A bench.celeryapp worker -l WARNING (Celery's defaults: "
            "prefork, concurrency = the CPUs, prefetch multiplier 4, acks early, no result "
            f"backend; broker Redis at {URL}; a task_postrun INCR counts jobs done)"
        )

    def ready(self, conn: Conn, workers: int) -> bool | None:
        return int(_redis().get("bench:ready") or 0) >= workers

    def remaining(self, conn: Conn, n: int) -> int:
        return n - int(_redis().get("bench:done") or 0)

    def settlements(self, conn: Conn) -> Settlements | None:
        # bench.celeryapp's task_postrun handler: the first time any child finished a
        # task, and each child's latest. Redis keeps no time per task, so "after the
        # first" counts every job but one.
        client = _redis()
        done = int(client.get("bench:done") or 0)
        first = client.get("bench:first")
        lasts = [float(client.get(key) or 0) for key in client.scan_iter("bench:last:*")]
        if not done or first is None or not lasts:
            return None
        return Settlements(done, float(first), max(lasts), done - 1)
