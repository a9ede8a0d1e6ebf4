"""How a run ends, without a database: a table of (run ending, failures so far, policy)
-> (status, journal outcome, failure counted, visible at), the rows of the lifecycle
table in ARCHITECTURE.md that a run or a lost lease decides. The cancel-request
override is applied where settlements are written; the database tests cover it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_jobqueue.executor import RunResult, decide
from django_jobqueue.ids import uuid7
from django_jobqueue.lifecycle import Policy, failure, released
from django_jobqueue.states import Outcome, Status
from django_jobqueue.store import Claimed

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
POLICY = Policy(
    max_failures=3,
    lease=timedelta(minutes=5),
    backoff_base=timedelta(seconds=10),
    backoff_cap=timedelta(hours=1),
    backoff_jitter=0.0,
)


def _job(failure_count: int) -> Claimed:
    return Claimed(
        id=uuid7(),
        kind="k",
        queue="default",
        payload={},
        priority=1,
        visible_at=NOW,
        run_count=failure_count + 1,
        failure_count=failure_count,
        carry={"kept": True},
        claimed_by="w",
        claim_expires_at=NOW + POLICY.lease,
    )


def _run(job: Claimed, end: str, **kw: Any) -> RunResult:
    return RunResult(
        job=job,
        end=end,  # type: ignore[arg-type]
        started_at=NOW,
        duration=timedelta(seconds=1),
        carry={"step": 2},
        **kw,
    )


# (ending, failures before, extra) -> (status, outcome, failed, visible_at, carry written)
ROWS = [
    ("completed", 0, {"value": 42}, Status.COMPLETED, Outcome.COMPLETED, False, None, None),
    (
        "paused",
        0,
        {"resume_in": timedelta(minutes=1)},
        Status.PENDING,
        Outcome.PAUSED,
        False,
        NOW + timedelta(minutes=1),
        {"step": 2},
    ),
    # The n-th failure waits base x (fib(n + 2) - 1): 10 s, then 20 s.
    (
        "failed",
        0,
        {},
        Status.PENDING,
        Outcome.RETRIED,
        True,
        NOW + timedelta(seconds=10),
        {"step": 2},
    ),
    (
        "failed",
        1,
        {},
        Status.PENDING,
        Outcome.RETRIED,
        True,
        NOW + timedelta(seconds=20),
        {"step": 2},
    ),
    # The failure that reaches max_failures (3) is the backstop.
    ("failed", 2, {}, Status.DEAD, Outcome.DEAD, True, None, {"step": 2}),
    ("permanent", 0, {}, Status.DEAD, Outcome.DEAD, True, None, {"step": 2}),
    ("mismatch", 0, {}, Status.DEAD, Outcome.DEAD, True, None, {"step": 2}),
]


@pytest.mark.parametrize(
    ("end", "failures", "extra", "status", "outcome", "failed", "visible_at", "carry"), ROWS
)
def test_a_run_ending_decides_the_settlement(
    end: str,
    failures: int,
    extra: dict[str, Any],
    status: str,
    outcome: str,
    failed: bool,
    visible_at: datetime | None,
    carry: dict[str, Any] | None,
) -> None:
    job = _job(failures)
    s = decide(_run(job, end, **extra), policy=POLICY, worker_id="w", now=NOW)
    assert (s.status, s.outcome, s.failed, s.visible_at, s.carry) == (
        status,
        outcome,
        failed,
        visible_at,
        carry,
    )
    assert (s.job_id, s.run_no, s.worker) == (job.id, job.run_count, "w")
    if end == "completed":
        assert s.result == 42
    if status == Status.DEAD and end == "failed":
        assert "failure 3 of max_failures=3" in s.note


@pytest.mark.parametrize(
    ("failures", "status", "outcome", "visible_at"),
    [
        (0, Status.PENDING, Outcome.STALE_RECOVERED, NOW + timedelta(seconds=10)),
        (2, Status.DEAD, Outcome.DEAD, None),
    ],
)
def test_a_lost_lease_is_a_counted_failure_keeping_the_stored_carry(
    failures: int, status: str, outcome: str, visible_at: datetime | None
) -> None:
    s = failure(
        job_id=uuid7(),
        kind="k",
        run_no=failures + 1,
        failure_count=failures,
        policy=POLICY,
        now=NOW,
        note="lease expired (worker w gone)",
        outcome=Outcome.STALE_RECOVERED,
        worker="w",
    )
    assert (s.status, s.outcome, s.failed, s.visible_at) == (status, outcome, True, visible_at)
    assert s.carry is None  # None keeps what the job last stored


def test_without_a_backstop_failures_retry_forever() -> None:
    s = failure(
        job_id=uuid7(),
        kind="k",
        run_no=1000,
        failure_count=999,
        policy=Policy(**{**POLICY.__dict__, "max_failures": None}),
        now=NOW,
        note="boom",
    )
    assert (s.status, s.outcome) == (Status.PENDING, Outcome.RETRIED)
    assert s.visible_at == NOW + POLICY.backoff_cap


def test_a_graceful_release_is_pending_now_without_a_failure() -> None:
    job_id = uuid7()
    s = released(job_id=job_id, kind="k", run_no=4, now=NOW, worker="w", note="worker shut down")
    assert (s.status, s.outcome, s.failed, s.visible_at, s.carry) == (
        Status.PENDING,
        Outcome.RELEASED,
        False,
        NOW,
        None,
    )
