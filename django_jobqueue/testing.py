"""Helpers for your project's tests: assert what was enqueued, run pending jobs inline.

``run_jobs`` claims, runs and settles jobs in the calling thread through the same
store and executor as a worker, so it works inside a test's transaction
(``TestCase``, pytest-django's ``db``), and ``now=`` runs jobs scheduled for later.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from django.utils import timezone

from . import atomic, conf, store
from .context import Context
from .executor import decide
from .handle import JobHandle
from .models import Job
from .registry import policy_for, registry
from .states import Status
from .task import FunctionTask, Task

TaskRef = str | FunctionTask | type[Task]


def _kind(ref: TaskRef) -> str:
    if isinstance(ref, str):
        return registry.get(ref).kind
    return ref.kind


def _matching(ref: TaskRef, payload: dict[str, Any]) -> list[Job]:
    kind = _kind(ref)
    found: list[Job] = []
    cursor = None
    while True:
        page = store.history(kind=kind, status=Status.PENDING, after=cursor, limit=500)
        found.extend(
            job for job in page.jobs if all(job.payload.get(k) == v for k, v in payload.items())
        )
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


def assert_enqueued(ref: TaskRef, *, count: int | None = None, **payload: Any) -> list[Job]:
    """Assert that pending jobs of this task exist whose payload contains ``payload``.

    With ``count``, exactly that many. Returns the matching jobs.
    """
    jobs = _matching(ref, payload)
    if count is None and not jobs:
        raise AssertionError(f"no pending {_kind(ref)} job with payload containing {payload!r}")
    if count is not None and len(jobs) != count:
        raise AssertionError(
            f"expected {count} pending {_kind(ref)} job(s) with payload containing {payload!r}, "
            f"found {len(jobs)}"
        )
    return jobs


def assert_not_enqueued(ref: TaskRef, **payload: Any) -> None:
    """Assert that no pending job of this task has a payload containing ``payload``."""
    jobs = _matching(ref, payload)
    if jobs:
        raise AssertionError(
            f"{len(jobs)} pending {_kind(ref)} job(s) with payload containing {payload!r}"
        )


def run_jobs(
    *,
    kinds: Sequence[TaskRef] | None = None,
    queues: Sequence[str] | None = None,
    now: datetime | None = None,
    max_jobs: int = 1000,
) -> list[JobHandle]:
    """Run claimable jobs one by one in this thread until none is left (or ``max_jobs`` ran).

    ``now`` treats the clock as reading that time when choosing what is runnable, so
    delayed, paused and backed-off jobs can be run without waiting. Returns a handle
    for each run, in order.
    """
    worker_id = f"testing:{os.getpid()}"
    settings = conf.get()
    wanted = [_kind(k) for k in kinds] if kinds else registry.kinds()
    ran: list[JobHandle] = []
    while len(ran) < max_jobs:
        claimed = store.claim_jobs(
            worker_id=worker_id,
            limit=1,
            kinds=wanted,
            queues=queues,
            leases=registry.leases(),
            now=now or timezone.now(),
        )
        if not claimed:
            break
        job = claimed[0]
        ctx = Context.for_job(job, history_loader=partial(store.journal, job_id=job.id))
        result = atomic.run(
            registry.find(job.kind),
            job,
            ctx,
            alias=settings.database,
            worker_id=worker_id,
            max_output_bytes=settings.max_output_bytes,
        )
        if not (result.settled or result.lost):
            settlement = decide(result, policy=policy_for(job.kind), worker_id=worker_id)
            store.settle(worker_id=worker_id, settlements=[settlement])
        ran.append(JobHandle(store.get_job(job_id=job.id)))
    return ran
