"""Helpers for your project's tests: assert what was enqueued, capture what a block
enqueues, run pending jobs (and whole workflows) inline, assert a workflow's outcome.

``run_jobs`` claims, runs and settles jobs in the calling thread through the same run
pipeline as a worker (``run.pipeline``: the same signals, the same guard on the
connections, the same lifecycle decisions), so it works inside a test's transaction
(``TestCase``, pytest-django's ``db``), drains the jobs that jobs enqueue, and ``now=``
runs jobs scheduled for later.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from django_jobqueue import conf, routing, store, validation
from django_jobqueue.models import Job
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.pipeline import Pipeline
from django_jobqueue.states import Status
from django_jobqueue.task import signalling
from django_jobqueue.task.classes import Task
from django_jobqueue.task.functions import FunctionTask
from django_jobqueue.task.handle import JobHandle
from django_jobqueue.task.registry import registry
from django_jobqueue.workflows import WorkflowHandle, workflow

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


def assert_workflow(
    handle: WorkflowHandle | uuid.UUID | str,
    *,
    status: str | None = None,
    steps: Mapping[str, str] | None = None,
) -> WorkflowHandle:
    """Assert a workflow's status and (some of) its steps' statuses, read afresh.

    ``steps`` maps step names to the status each must have (names not given are not
    checked; a name that is no step fails). Returns the re-read handle, whose
    ``steps`` give each step's result.
    """
    found = workflow(handle.id if isinstance(handle, WorkflowHandle) else handle)
    problems = []
    if status is not None and found.status != status:
        problems.append(f"workflow {found.name!r} is {found.status}, expected {status}")
    actual = found.steps
    for name, wanted in (steps or {}).items():
        step = actual.get(name)
        if step is None:
            problems.append(f"no step named {name!r} (steps: {', '.join(sorted(actual))})")
        elif step.status != wanted:
            problems.append(f"step {name!r} is {step.status}, expected {wanted}")
    if problems:
        raise AssertionError("; ".join(problems))
    return found


class TooManyJobs(AssertionError):
    """``run_jobs`` ran its ``max_jobs`` and jobs were still runnable."""


def run_jobs(
    *,
    kinds: Sequence[TaskRef] | None = None,
    queues: Sequence[str] | None = None,
    now: datetime | None = None,
    max_jobs: int = 1000,
) -> list[JobHandle]:
    """Run claimable jobs one by one in this thread until none is left, including the
    jobs those jobs enqueue and the workflow steps their settlements release (so a
    workflow runs to its end); returns a handle for each run, in order.

    ``now`` treats the clock as reading that time when choosing what is runnable, so
    delayed, paused and backed-off jobs can be run without waiting. ``max_jobs`` bounds
    the runs: if that many ran and a job is still runnable (a job that enqueues
    another without end, a pause that never finishes), ``TooManyJobs`` is raised.
    """
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
        raise ValueError(f"max_jobs must be a positive int, got {max_jobs!r}")
    settings = conf.get()
    pipe = Pipeline(
        worker_id=f"testing:{os.getpid()}",
        alias=routing.current(),
        max_output_bytes=settings.max_output_bytes,
    )
    wanted = [_kind(k) for k in kinds] if kinds else registry.kinds()
    ran: list[JobHandle] = []
    # The worker's slots' guard, on the caller's connections: a transaction a run leaves
    # open is rolled back (above the test's own, which stays open) and fails the run.
    with ThreadConnections() as guard:
        while True:
            at = now or timezone.now()
            if len(ran) >= max_jobs:
                _check_drained(max_jobs, at=at, kinds=wanted, queues=queues)
                break
            request = store.ClaimRequest(
                limit=1, kinds=wanted, queues=queues or (), leases=registry.leases(), now=at
            )
            claimed = store.claim_jobs(worker_id=pipe.worker_id, request=request)
            if not claimed:
                break
            job = claimed[0]
            settlement = pipe.to_write(pipe.run_one(job, pipe.context(job), guard))
            if settlement is not None:  # written at once, alone: no batch to wait for
                pipe.settled(
                    [settlement],
                    store.settle(worker_id=pipe.worker_id, settlements=[settlement]),
                )
            ran.append(JobHandle(store.get_job(job_id=job.id)))
    return ran


def _check_drained(
    max_jobs: int, *, at: datetime, kinds: list[str], queues: Sequence[str] | None
) -> None:
    """After ``max_jobs`` runs: raise ``TooManyJobs`` if a job is still runnable."""
    if store.oldest_due(now=at, kinds=kinds, queues=queues) is not None:
        raise TooManyJobs(
            f"run_jobs ran max_jobs={max_jobs} jobs and jobs are still runnable: do jobs "
            "keep enqueuing jobs (or pausing) without end? Pass a larger max_jobs if "
            "this many runs are expected."
        )


@dataclass(frozen=True)
class CapturedJob:
    """One enqueue seen by ``captured_jobs()``.

    ``payload`` is the task's arguments as they are stored (JSON: a tuple reads back as
    a list); for a merge it is what the enqueue asked for, not the merged result.
    ``options`` holds the enqueue's resolved options: ``queue``, ``priority``,
    ``delay``, ``run_at``, ``idempotency_key`` and ``dedup_key``.
    """

    kind: str
    payload: dict[str, Any]
    options: dict[str, Any]
    handle: JobHandle


@contextlib.contextmanager
def captured_jobs() -> Iterator[list[CapturedJob]]:
    """List every job enqueued while the block runs (in any thread), in order.

    Each entry is recorded at the enqueue call, before its transaction commits: a
    job whose transaction rolls back afterwards is still listed. Bulk enqueues give
    an entry per job; an enqueue that raised (bad input) gives none.
    """
    captured: list[CapturedJob] = []
    lock = threading.Lock()

    def record(e: signalling.Enqueued) -> None:
        r = e.request
        text = r.payload_json if r.payload_json is not None else validation.dumps(r.payload)
        entry = CapturedJob(
            kind=r.kind,
            payload=json.loads(text),
            options={
                "queue": r.queue,
                "priority": r.priority,
                "delay": r.delay,
                "run_at": r.run_at,
                "idempotency_key": r.idempotency_key,
                "dedup_key": r.dedup_key,
            },
            handle=e.handle,
        )
        with lock:
            captured.append(entry)

    with signalling.observe_enqueues(record):
        yield captured
