"""The workflow chaos campaign's CI form: 100 workflows (85 diamonds, 15 chords of 20
members: 655 steps), 3 workers, SIGKILLs, SIGTERMs and terminated connections while they
drain; every join must fire exactly once, no step may start before its parents finished,
and nothing may be lost.

``JOBQUEUE_WF_CHAOS_LONG=1`` runs the longer form here (1,000 workflows, 200 of them
chords, 60 SIGKILLs, 30 SIGTERMs, 30 rounds of cuts); ``python -m
tests.chaos.workflow_campaign`` runs any size against a database of its own (see
``workflow_campaign.py``).
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.campaign import assert_unbroken_under_every_fault
from tests.chaos.workflow_campaign import WorkflowCampaign, WorkflowPlan
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]

LONG = os.environ.get("JOBQUEUE_WF_CHAOS_LONG") == "1"
# The timeouts are for a machine far slower than CI's: the short form takes well under a
# minute there.
SHORT_PLAN = WorkflowPlan(
    workflows=100, chords=15, workers=3, kills=4, stops=2, cuts=3, timeout=240.0
)
LONG_PLAN = WorkflowPlan(
    workflows=1000, chords=200, workers=4, kills=60, stops=30, cuts=30, timeout=1800.0
)


@postgres_only
@pytest.mark.timeout(2400 if LONG else 300)
def test_workflow_joins_fire_exactly_once_in_order_through_kills_stops_and_cuts(
    runworker: WorkerProcesses,
) -> None:
    plan = LONG_PLAN if LONG else SHORT_PLAN
    report = WorkflowCampaign(plan, runworker).run()
    print(report.text())

    # The faults really happened, while there was work to cut short.
    assert_unbroken_under_every_fault(report, plan)
    assert report.tally.backends_terminated >= plan.cuts, report.text()
    assert report.outcomes["stale-recovered"] >= 1, "no kill caught a run in flight"
    # Nothing lost, every join once.
    assert report.statuses == {"completed": plan.workflows}, report.text()
    assert report.outcomes["completed"] == plan.steps, report.text()
    assert report.effects_per_join == {1: plan.workflows}, report.text()
    assert report.edges == plan.edges, report.text()
