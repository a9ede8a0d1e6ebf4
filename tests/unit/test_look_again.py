"""When a worker's turn claims again at once (``claiming.look_again``): only when its
settlements may have made claimable what its own claim, which ran beside them, missed."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue.rules.lifecycle import Run, Settlement, completed, released
from django_jobqueue.states import Outcome, Status
from django_jobqueue.store import ClaimRequest, KeyRule
from django_jobqueue.worker.claiming import look_again


def _run() -> Run:
    return Run(uuid.uuid4(), "tests.noop", 1, "w", step=True)


def _claim(**bounds: Any) -> ClaimRequest:
    return ClaimRequest(limit=4, kinds=["tests.noop", "tests.capped", "tests.keyed"], **bounds)


def _done(n: int = 2) -> list[Settlement]:
    return [completed(_run(), result=i) for i in range(n)]


def test_completions_all_applied_under_an_unbounded_claim_need_no_second_look() -> None:
    assert look_again(_done(), [True, True], _claim()) is False
    # A stale run's completion (not applied) leaves nothing new either.
    assert look_again(_done(), [True, False], _claim()) is False


def test_a_turn_that_settled_nothing_needs_no_second_look() -> None:
    assert look_again([], [], _claim()) is False


def test_a_settlement_back_to_pending_is_looked_for_again() -> None:
    back = released(_run(), now=timezone.now(), note="worker shut down")
    assert look_again([*_done(1), back], [True, True], _claim()) is True


@pytest.mark.parametrize(
    "bounds",
    [
        {"exclude_kinds": {"tests.capped"}},
        {"kind_limits": {"tests.capped": 1}},
        {"max_in_flight": {"tests.capped": 2}},
    ],
    ids=["at-cap", "capped", "global-limit"],
)
def test_room_a_completion_frees_under_a_bound_is_looked_for_again(
    bounds: dict[str, Any],
) -> None:
    assert look_again(_done(), [True, True], _claim(**bounds)) is True


def test_room_a_completion_frees_under_a_per_key_rule_needs_no_second_look() -> None:
    """The claim's count per key leaves out the jobs its turn completes (issue 23)."""
    assert (
        look_again(_done(), [True, True], _claim(per_key={"tests.keyed": KeyRule(most=1)})) is False
    )


def test_a_turn_with_no_claim_looks_again_once_there_is_room() -> None:
    assert look_again(_done(), [True, True], None) is True


def test_a_delayed_retry_is_not_a_completion() -> None:
    later = timezone.now() + timedelta(seconds=30)
    retry = Settlement(
        job_id=uuid.uuid4(),
        kind="k",
        run_no=1,
        outcome=Outcome.RETRIED,
        status=Status.PENDING,
        visible_at=later,
        failed=True,
    )
    assert look_again([retry], [True], _claim()) is True
