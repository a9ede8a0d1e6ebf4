"""The Celery peer's app (Celery 5 itself, on Redis): a no-op task and a stamp task,
Celery's defaults otherwise (prefork, concurrency = the CPUs, no result backend).

Jobs done are counted in Redis by a ``task_postrun`` handler (one ``INCR`` a task, on
the connection pool of each prefork child): the harness reads that count. Imported
only by the Celery peer's children (``celery -A bench.celeryapp worker``, the agent).
"""

from __future__ import annotations

import os
from typing import Any

import redis
from celery import Celery
from celery.signals import task_postrun, worker_ready

from bench.stamps import write_stamp

URL = os.environ.get("BENCH_CELERY_REDIS", "redis://127.0.0.1:6379/13")
DONE = "bench:done"
READY = "bench:ready"

app = Celery("bench", broker=URL)

_client: list[redis.Redis] = []


def client() -> redis.Redis:
    if not _client:
        _client.append(redis.Redis.from_url(URL))
    return _client[0]


@app.task(name="bench.noop")
def noop() -> None:
    return None


@app.task(name="bench.stamp")
def stamp(label: str) -> None:
    write_stamp(label)


@task_postrun.connect
def _count(**kwargs: Any) -> None:
    client().incr(DONE)


@worker_ready.connect
def _ready(**kwargs: Any) -> None:
    client().incr(READY)
