"""The chaos campaign's CI form: 2,000 jobs, 4 workers, 20 SIGKILLs, 10 SIGTERMs and 10
rounds of terminated connections; every delivery guarantee must hold at the end.

``python -m tests.chaos.campaign`` runs the long form (see ``campaign.py``).
"""

from __future__ import annotations

import pytest

from tests.chaos.campaign import Campaign, Plan
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only

pytestmark = [postgres_only, pytest.mark.chaos, pytest.mark.django_db(transaction=True)]


@pytest.mark.timeout(900)
def test_chaos_campaign_loses_nothing_and_settles_every_run_once(
    runworker: WorkerProcesses,
) -> None:
    plan = Plan(jobs=2000, workers=4, kills=20, stops=10, cuts=10)
    report = Campaign(plan, runworker).run()
    print(report.text())

    assert report.violations == [], report.text()
    # The faults really happened, while there was work to cut short.
    assert report.tally.kills == plan.kills, report.text()
    assert report.tally.stops == plan.stops, report.text()
    assert report.tally.cuts == plan.cuts, report.text()
    assert report.tally.backends_terminated >= plan.cuts, report.text()
    assert report.outcomes["completed"] == plan.jobs
    assert report.outcomes["stale-recovered"] >= 1, "no kill caught a run in flight"
    assert sum(report.executions_per_job.values()) == plan.jobs
