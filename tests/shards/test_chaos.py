"""The chaos campaign (``tests/chaos/campaign.py``) with its jobs routed by key over two
queue databases, each on a cluster of its own, and its workers spread over them: one
``runworker --database`` for each, and one with no flag, which supervises a worker
process per database. Every fault kind aims at each database's workers in turn: a
SIGKILL (of a ``--database`` worker, and in the next round of the no-flag worker's
process serving that database, which its supervisor replaces), a SIGTERM (of a worker
serving it), a cut of that database's connections only, the other's left alone; and
one cluster is restarted mid-campaign (``pg_ctl restart -m fast``). At the end every
guarantee of the campaign is checked on each database: as many jobs there as were
enqueued to it, each where its key routes it, none left claimed, each completed once
with its journal complete.

The CI form: 600 jobs, 6 SIGKILLs, 4 SIGTERMs, 4 cuts, one restart.
``JOBQUEUE_LONG_TESTS=1`` runs 2,000 jobs on four workers, 20 SIGKILLs, 10 SIGTERMs,
10 cuts and two restarts (one of each cluster).
"""

from __future__ import annotations

import os

import pytest

from tests.chaos import pgserver
from tests.chaos.campaign import Campaign, Plan, assert_unbroken_under_every_fault
from tests.shards import layout
from tests.shards.conftest import DATABASES, ShardWorkers

pytestmark = [pytest.mark.shards, pytest.mark.django_db(transaction=True, databases=DATABASES)]

LONG = os.environ.get("JOBQUEUE_LONG_TESTS") == "1"
JOBS, WORKERS, KILLS, STOPS, CUTS, RESTARTS = (
    (2000, 4, 20, 10, 10, 2) if LONG else (600, 3, 6, 4, 4, 1)
)


@pytest.mark.timeout(900)
def test_chaos_campaign_over_two_databases_loses_nothing_on_either(
    shard_workers: ShardWorkers, sharded: dict[str, pgserver.ThrowawayPostgres]
) -> None:
    plan = Plan(
        jobs=JOBS,
        workers=WORKERS,
        kills=KILLS,
        stops=STOPS,
        cuts=CUTS,
        restarts=RESTARTS,
        databases=layout.ALIASES,
    )
    assert None in plan.layout
    assert set(plan.layout) >= set(layout.ALIASES)
    report = Campaign(plan, shard_workers, restart=lambda alias: sharded[alias].restart()).run()
    print(report.text())

    assert_unbroken_under_every_fault(report, plan)
    assert report.outcomes["completed"] == plan.jobs
    assert report.outcomes["stale-recovered"] >= 1, "no kill caught a run in flight"
    assert sum(report.executions_per_job.values()) == plan.jobs
    # Both databases had a share of the jobs, and every kind of fault hit each one's.
    tally = report.tally
    assert all(tally.enqueued[alias] > 0 for alias in layout.ALIASES), report.text()
    assert sum(tally.enqueued.values()) == plan.jobs
    for fault in ("kill", "process-kill", "stop", "cut"):
        for alias in layout.ALIASES:
            assert tally.aimed[f"{fault}@{alias}"] >= 1, report.text()
