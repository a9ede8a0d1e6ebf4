"""The Celery peer's app (Celery 5 itself, on Redis): a no-op task and a stamp task,
Celery's defaults otherwise (prefork, concurrency = the CPUs, no result backend).

Jobs done are counted in Redis by a ``task_postrun`` handler (one pipelined round trip a
task, on the connection pool of each prefork child: ``INCR`` the count, ``SETNX`` the
first finish time, ``SET`` the child's latest): the harness reads the count, and the
times for a drain's whole-run, steady and start-up figures (bench/phases.py). Imported
only by the Celery peer's children (``celery -A bench.celeryapp worker``, the agent).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery
from celery.signals import task_postrun, worker_ready

from bench.stamps import write_stamp

URL = os.environ.get("BENCH_CELERY_REDIS", "redis://127.0.0.1:6379/13")
DONE = "bench:done"
FIRST = "bench:first"  # time.time() of the first task finished
LAST = "bench:last:"  # + a child's pid: time.time() of its latest task finished
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
    now = time.time()
    pipe = client().pipeline(transaction=False)
    pipe.incr(DONE)
    pipe.setnx(FIRST, repr(now))
    pipe.set(f"{LAST}{os.getpid()}", repr(now))
    pipe.execute()


@worker_ready.connect
def _ready(**kwargs: Any) -> None:
    client().incr(READY)
