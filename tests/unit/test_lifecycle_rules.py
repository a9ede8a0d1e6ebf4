"""How a run ends, without a database: a table of (run ending, failures so far, policy)
-> (status, journal outcome, failure counted, visible at), the rows of the lifecycle
table in ARCHITECTURE.md that a run or a lost lease decides, and what each ending
becomes when an operator asked to cancel the job meanwhile. The database tests show
the storage layer applying these settlements on every path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_jobqueue.ids import uuid7
from django_jobqueue.rules.lifecycle import (
    Policy,
    Run,
    Settlement,
    failure,
    on_cancel_request,
    released,
)
from django_jobqueue.run.executor import RunResult, decide
from django_jobqueue.states import Outcome, Status
from django_jobqueue.store import Claimed
from tests.helpers import claimed

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
POLICY = Policy(
    max_failures=3,
    lease=timedelta(minutes=5),
    backoff_base=timedelta(seconds=10),
    backoff_cap=timedelta(hours=1),
    backoff_jitter=0.0,
)


def _job(failure_count: int) -> Claimed:
    return claimed(
        at=NOW,
        lease=POLICY.lease,
        run_count=failure_count + 1,
        failure_count=failure_count,
        carry={"kept": True},
        claimed_by="w",
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


def _recovered(failures: int) -> Settlement:
    return failure(
        Run(job_id=uuid7(), kind="k", run_no=failures + 1, worker="ghost"),
        failure_count=failures,
        policy=POLICY,
        now=NOW,
        note="lease expired (worker ghost gone)",
        outcome=Outcome.STALE_RECOVERED,
    )


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
    s = _recovered(failures)
    assert (s.status, s.outcome, s.failed, s.visible_at) == (status, outcome, True, visible_at)
    assert s.carry is None  # None keeps what the job last stored


def test_without_a_backstop_failures_retry_forever() -> None:
    s = failure(
        Run(job_id=uuid7(), kind="k", run_no=1000, worker="w"),
        failure_count=999,
        policy=Policy(**{**POLICY.__dict__, "max_failures": None}),
        now=NOW,
        note="boom",
    )
    assert (s.status, s.outcome) == (Status.PENDING, Outcome.RETRIED)
    assert s.visible_at == NOW + POLICY.backoff_cap


def test_a_graceful_release_is_pending_now_without_a_failure() -> None:
    s = released(Run(job_id=uuid7(), kind="k", run_no=4, worker="w"), now=NOW, note="shut down")
    assert (s.status, s.outcome, s.failed, s.visible_at, s.carry) == (
        Status.PENDING,
        Outcome.RELEASED,
        False,
        NOW,
        None,
    )


def _ending(end: str, failures: int = 0, **extra: Any) -> Settlement:
    return decide(_run(_job(failures), end, **extra), policy=POLICY, worker_id="w", now=NOW)


# A cancel request turns every ending that would go back to pending into cancelled,
# whichever path produced it; completed and dead endings (the backstop too) stand.
CANCEL_ROWS = [
    ("retry", lambda: _ending("failed"), "retried"),
    ("pause", lambda: _ending("paused", resume_in=timedelta(minutes=1)), "paused"),
    (
        "release",
        lambda: released(Run(job_id=uuid7(), kind="k", run_no=1, worker="w"), now=NOW, note="bye"),
        "released",
    ),
    ("stale recovery", lambda: _recovered(0), "stale-recovered"),
    ("completion", lambda: _ending("completed", value=1), None),
    ("permanent", lambda: _ending("permanent"), None),
    ("backstop after a run", lambda: _ending("failed", 2), None),
    ("backstop after a lost lease", lambda: _recovered(2), None),
]


@pytest.mark.parametrize(
    ("name", "make", "run_outcome"), CANCEL_ROWS, ids=[r[0] for r in CANCEL_ROWS]
)
def test_a_cancel_request_overrides_only_endings_that_go_back_to_pending(
    name: str, make: Any, run_outcome: str | None
) -> None:
    s = make()
    instead = on_cancel_request(s)
    if run_outcome is None:
        assert instead is None
        return
    assert instead is not None
    assert (instead.status, instead.outcome, instead.visible_at) == (
        Status.CANCELLED,
        Outcome.CANCELLED,
        None,
    )
    assert instead.note.startswith(f"cancelled on request (run ended: {run_outcome})")
    # Everything else of the run is kept: its failure count, carry, attachment, guard.
    assert (instead.failed, instead.carry, instead.job_id, instead.run_no, instead.worker) == (
        s.failed,
        s.carry,
        s.job_id,
        s.run_no,
        s.worker,
    )
