"""A plain-Python model of the job lifecycle in ARCHITECTURE.md, for the stateful test.

It knows nothing of the package's code apart from the backoff curve (``backoff.delay``,
which has its own unit tests): every rule of the lifecycle table, the cancel request,
requeue, merge, idempotency keys and cleanup is written here again, from the design,
so that the database and this model can be compared after every step.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django_jobqueue.rules import backoff

ACTIVE = ("pending", "claimed")
TERMINAL = ("completed", "dead", "cancelled")

MAX_FAILURES = 2
LEASE = timedelta(seconds=30)
BACKOFF_BASE = timedelta(seconds=5)
BACKOFF_CAP = timedelta(seconds=60)
BACKOFF_JITTER = 0.2


@dataclass
class MJob:
    """One job as the model sees it."""

    id: uuid.UUID
    kind: str
    payload: dict[str, Any]
    priority: int
    visible_at: datetime
    # False: ``visible_at`` is only an upper bound (the row took the real clock's now)
    exact: bool
    idempotency_key: str | None = None
    dedup_key: str | None = None
    status: str = "pending"
    run_count: int = 0
    failure_count: int = 0
    carry: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    claimed_by: str = ""
    claim_expires_at: datetime | None = None
    cancel_requested: bool = False
    journal: list[tuple[str, int]] = field(default_factory=list)  # (outcome, run no)

    def claimable(self, now: datetime) -> bool:
        return self.status == "pending" and self.visible_at <= now

    def holds(self, worker: str, run_no: int) -> bool:
        """Whether run ``run_no`` by ``worker`` is still this job's claim."""
        return self.status == "claimed" and self.claimed_by == worker and self.run_count == run_no


@dataclass(frozen=True)
class Ending:
    """How a run ends, by the lifecycle table (before an operator's cancel request)."""

    status: str
    outcome: str
    visible_at: datetime | None = None
    failed: bool = False
    carry: dict[str, Any] | None = None  # None: keep the stored carry
    result: Any = None


def completed(value: Any) -> Ending:
    return Ending("completed", "completed", result=value)


def paused(now: datetime, resume_in: timedelta, carry: dict[str, Any]) -> Ending:
    return Ending("pending", "paused", visible_at=now + resume_in, carry=carry)


def permanent(carry: dict[str, Any]) -> Ending:
    return Ending("dead", "dead", failed=True, carry=carry)


def released(now: datetime) -> Ending:
    return Ending("pending", "released", visible_at=now)


def failed(
    job: MJob, now: datetime, carry: dict[str, Any] | None, outcome: str = "retried"
) -> Ending:
    """A counted failure: back after backoff, or dead once the backstop is reached."""
    failures = job.failure_count + 1
    if failures >= MAX_FAILURES:
        return Ending("dead", "dead", failed=True, carry=carry)
    delay = backoff.delay(
        failures, base=BACKOFF_BASE, cap=BACKOFF_CAP, jitter=BACKOFF_JITTER, job_id=job.id
    )
    return Ending("pending", outcome, visible_at=now + delay, failed=True, carry=carry)


class Model:
    """Every job ever enqueued (deleted ones leave the dict), in creation order."""

    def __init__(self) -> None:
        self.jobs: dict[uuid.UUID, MJob] = {}

    def add(self, job: MJob) -> None:
        self.jobs[job.id] = job

    def claimable(self, now: datetime) -> list[MJob]:
        return [j for j in self.jobs.values() if j.claimable(now)]

    def claim(self, job: MJob, worker: str, now: datetime) -> None:
        job.status = "claimed"
        job.run_count += 1
        job.claimed_by = worker
        job.claim_expires_at = now + LEASE

    def settle(self, job: MJob, run_no: int, ending: Ending) -> None:
        """Apply a run's ending (its claim is current), with the cancel-request override."""
        status, outcome = ending.status, ending.outcome
        if job.cancel_requested and status == "pending":
            status, outcome = "cancelled", "cancelled"
        job.status = status
        if status == "pending":
            assert ending.visible_at is not None
            job.visible_at, job.exact = ending.visible_at, True
        job.failure_count += 1 if ending.failed else 0
        if ending.carry is not None:
            job.carry = dict(ending.carry)
        job.result = ending.result
        job.claimed_by, job.claim_expires_at, job.cancel_requested = "", None, False
        job.journal.append((outcome, run_no))

    def expired(self, now: datetime) -> list[MJob]:
        return [
            j
            for j in self.jobs.values()
            if j.status == "claimed" and j.claim_expires_at is not None and j.claim_expires_at < now
        ]

    def active_with_key(self, key: str) -> MJob | None:
        for job in self.jobs.values():
            if job.idempotency_key == key and job.status in ACTIVE:
                return job
        return None

    def merge_candidates(self, kind: str, dedup_key: str) -> list[MJob]:
        """Pending jobs of the kind and key, oldest first."""
        return [
            j
            for j in self.jobs.values()
            if j.status == "pending" and j.kind == kind and j.dedup_key == dedup_key
        ]

    def cancel(self, job: MJob) -> str | None:
        """What ``cancel`` does; the error's name if it refuses."""
        if job.status == "pending":
            job.status = "cancelled"
            job.journal.append(("cancelled", job.run_count))
        elif job.status == "claimed":
            job.cancel_requested = True
        elif job.status != "cancelled":
            return "InvalidTransition"
        return None

    def requeue(self, job: MJob, *, force: bool, now: datetime) -> str | None:
        """What ``requeue`` does; the error's name if it refuses."""
        if job.status in ACTIVE or (job.status == "completed" and not force):
            return "InvalidTransition"
        key = job.idempotency_key
        if key is not None and self.active_with_key(key) is not None:
            return "InvalidTransition"
        job.status = "pending"
        job.visible_at, job.exact = now, False
        job.failure_count = 0
        job.result = None
        job.cancel_requested = False
        job.journal.append(("requeued", job.run_count))
        return None

    def cleanup(self, *, kind: str | None, statuses: tuple[str, ...], dry_run: bool) -> int:
        doomed = [
            j.id
            for j in self.jobs.values()
            if j.status in statuses and (kind is None or j.kind == kind)
        ]
        if not dry_run:
            for job_id in doomed:
                del self.jobs[job_id]
        return len(doomed)
