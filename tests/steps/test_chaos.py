"""The durable-steps chaos campaign's CI form: 200 jobs of five steps with a sleep
between the second and the third, 3 workers, SIGKILLs, SIGTERMs and terminated
connections while they drain; every step's side effect exactly once, every job
completed, every job's stream every item once and in order.

``JOBQUEUE_LONG_TESTS=1`` runs the long form here (2,000 jobs, 40 SIGKILLs, 20
SIGTERMs, 20 rounds of cuts); ``python -m tests.steps.campaign`` runs any size against
a database of its own.
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.campaign import assert_unbroken_under_every_fault
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only
from tests.steps.async_campaign import AsyncCampaign, AsyncPlan
from tests.steps.campaign import StepsCampaign, StepsPlan

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]

LONG = os.environ.get("JOBQUEUE_LONG_TESTS") == "1"
SHORT_PLAN = StepsPlan(jobs=200, workers=3, kills=4, stops=2, cuts=3, timeout=240.0)
LONG_PLAN = StepsPlan(jobs=2000, workers=4, kills=40, stops=20, cuts=20, timeout=1800.0)


@postgres_only
@pytest.mark.timeout(2400 if LONG else 300)
def test_every_step_runs_once_and_every_job_completes_through_kills_stops_and_cuts(
    runworker: WorkerProcesses,
) -> None:
    plan = LONG_PLAN if LONG else SHORT_PLAN
    report = StepsCampaign(plan, runworker).run()
    print(report.text())

    assert_unbroken_under_every_fault(report, plan)
    assert report.statuses == {"completed": plan.jobs}, report.text()
    assert report.effects_per_step == {1: plan.jobs * 5}, report.text()
    assert report.outcomes["paused"] >= plan.jobs, report.text()  # every job slept


ASYNC_SHORT = AsyncPlan(jobs=60, workers=3, kills=4, stops=2, cuts=3, timeout=300.0)
ASYNC_LONG = AsyncPlan(jobs=600, workers=4, kills=30, stops=15, cuts=15, timeout=1800.0)


@postgres_only
@pytest.mark.timeout(2400 if LONG else 400)
def test_every_async_step_and_child_runs_once_and_every_job_completes_through_faults(
    runworker: WorkerProcesses,
) -> None:
    """``async def`` jobs with ``astep``s, a child chord (``astep_workflow``) and a sleep,
    drained through SIGKILLs, SIGTERMs and cut connections: every step's, member's and
    callback's side effect exactly once, every job its chord's sum."""
    plan = ASYNC_LONG if LONG else ASYNC_SHORT
    report = AsyncCampaign(plan, runworker).run()
    print(report.text())

    assert_unbroken_under_every_fault(report, plan)
    assert report.statuses == {"completed": plan.jobs}, report.text()
    assert report.effects_per_step == {1: plan.jobs * (3 + plan.members + 1)}, report.text()
