"""How a run ends, as values: the failure policy and the settlement the storage layer applies.

Pure (no database, no Django settings): the executor, the worker and the storage
layer all build settlements here, so a retry, a backstop death, a release and a stale
recovery follow the same rules whichever path produced them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from . import backoff
from .states import Outcome, Status


@dataclass(frozen=True)
class Policy:
    """What a kind's failures and leases cost: resolved from the task and the settings."""

    max_failures: int | None
    lease: timedelta
    backoff_base: timedelta
    backoff_cap: timedelta
    backoff_jitter: float


@dataclass(frozen=True, slots=True)
class Settlement:
    """How one run ends: the row's next state and its journal entry.

    The storage layer applies it only if the claim is still this run's: status
    claimed, ``claimed_by`` equal to ``worker`` (the worker that settles; for a stale
    recovery, the worker that was lost) and the same run number.
    """

    job_id: uuid.UUID
    kind: str
    run_no: int
    outcome: str  # an Outcome value
    status: str  # the job's next Status value
    visible_at: datetime | None = None  # for a job going back to pending
    failed: bool = False  # counts as a failure
    carry: dict[str, Any] | None = None  # None keeps the stored carry
    result: Any = None
    note: str = ""
    attachment: Any = None
    started_at: datetime | None = None
    duration: timedelta | None = None
    worker: str = ""


def exhausted(failures: int, policy: Policy) -> bool:
    """Whether ``failures`` counted failures reach the policy's backstop (the job dies)."""
    return policy.max_failures is not None and failures >= policy.max_failures


def failure(
    *,
    job_id: uuid.UUID,
    kind: str,
    run_no: int,
    failure_count: int,
    policy: Policy,
    now: datetime,
    note: str,
    carry: dict[str, Any] | None = None,
    outcome: str = Outcome.RETRIED,
    delay: timedelta | None = None,
    **rest: Any,
) -> Settlement:
    """A counted failure: back to pending after backoff, or dead once max_failures is reached.

    ``failure_count`` is the count before this failure; ``outcome`` is what a retry is
    journalled as (``retried`` after a run, ``stale-recovered`` after a lost lease);
    ``delay``, when given, replaces the backoff curve for this one retry.
    """
    failures = failure_count + 1
    visible_at: datetime | None = None
    if exhausted(failures, policy):
        outcome, status = Outcome.DEAD, Status.DEAD
        note = f"{note}\n(failure {failures} of max_failures={policy.max_failures})".strip()
    else:
        status = Status.PENDING
        if delay is None:
            delay = backoff.delay(
                failures,
                base=policy.backoff_base,
                cap=policy.backoff_cap,
                jitter=policy.backoff_jitter,
                job_id=job_id,
            )
        visible_at = now + delay
    return Settlement(
        job_id=job_id,
        kind=kind,
        run_no=run_no,
        outcome=outcome,
        status=status,
        visible_at=visible_at,
        failed=True,
        carry=carry,
        note=note,
        **rest,
    )


def released(
    *, job_id: uuid.UUID, kind: str, run_no: int, now: datetime, worker: str, note: str
) -> Settlement:
    """A graceful hand-back at shutdown: pending now, no failure counted, carry as last settled."""
    return Settlement(
        job_id=job_id,
        kind=kind,
        run_no=run_no,
        outcome=Outcome.RELEASED,
        status=Status.PENDING,
        visible_at=now,
        note=note,
        worker=worker,
    )


def cancel_note(actor: str, run_outcome: str, note: str) -> str:
    """The journal note of a run whose job an operator asked to cancel while it ran."""
    by = f" by {actor}" if actor else ""
    return f"cancelled on request{by} (run ended: {run_outcome})\n{note}".strip()
