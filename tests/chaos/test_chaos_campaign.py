"""The chaos campaign's CI form: 800 jobs, 8 SIGKILLs, 4 SIGTERMs and 4 rounds of
terminated connections; every delivery guarantee must hold at the end.

It runs twice: plain jobs on ``runworker --processes 2`` workers (two supervisors of two
worker processes each), and atomic jobs, whose writes must happen exactly once, on four
plain ``runworker`` workers; so each kind of worker and each kind of job meets every
kind of fault. (CI ran plain jobs on plain workers as a third campaign too, with the
same checks as the atomic one's but the effects: about a fifth of the fault tier's CPU,
nearly all of it starting a child after each fault. ``JOBQUEUE_LONG_TESTS=1`` runs it.)

``JOBQUEUE_LONG_TESTS=1`` runs the former CI form (2,000 jobs, 20 SIGKILLs, 10 SIGTERMs,
10 cuts); ``python -m tests.chaos.campaign`` the long form (see ``campaign.py``). The CI
form is smaller because nearly all of its CPU goes into starting a ``runworker`` child
after each fault: every kind of fault still hits workers with work in flight, several
times over, and every check below is the same.
"""

from __future__ import annotations

import os

import pytest

from tests.chaos.campaign import Campaign, Plan, assert_unbroken_under_every_fault
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import is_postgres, postgres_only

pytestmark = [pytest.mark.chaos, pytest.mark.django_db(transaction=True)]

LONG = os.environ.get("JOBQUEUE_LONG_TESTS") == "1"
# The faults of each kind (SIGKILL, SIGTERM, connection cuts) and the jobs they cut into.
JOBS, KILLS, STOPS, CUTS = (2000, 20, 10, 10) if LONG else (800, 8, 4, 4)


@postgres_only
@pytest.mark.timeout(900)
def test_chaos_campaign_with_supervised_workers_loses_nothing(runworker: WorkerProcesses) -> None:
    """The same faults on ``runworker --processes 2``: two supervisors of two worker
    processes each; a SIGKILL hits one worker process (its supervisor replaces it), a
    SIGTERM a supervisor (which stops both of its own gracefully)."""
    plan = Plan(jobs=JOBS, workers=2, processes=2, kills=KILLS, stops=STOPS, cuts=CUTS)
    report = Campaign(plan, runworker).run()
    print(report.text())

    assert_unbroken_under_every_fault(report, plan)
    assert report.outcomes["completed"] == plan.jobs
    assert report.outcomes["stale-recovered"] >= 1, "no kill caught a run in flight"
    assert sum(report.executions_per_job.values()) == plan.jobs


@postgres_only
@pytest.mark.timeout(900)
@pytest.mark.parametrize("pool", ["thread", "process"])
def test_atomic_task_effects_happen_exactly_once_through_kills_and_cuts(
    runworker: WorkerProcesses, pool: str
) -> None:
    """Issue 12's campaign: an atomic task writes one row per run in its run's transaction,
    into a table with no unique constraint; runs are repeated (killed, cut, released),
    their effects are not. On the process pool too (issue 32): each run in a child of
    its worker, which dies with it; the atomic settlement is the child's."""
    plan = Plan(
        jobs=JOBS, workers=4, kills=KILLS, stops=STOPS // 2, cuts=CUTS, atomic=True, pool=pool
    )
    report = Campaign(plan, runworker).run()
    print(report.text())

    assert report.violations == [], report.text()
    assert report.tally.kills == plan.kills, report.text()
    assert report.tally.cuts == plan.cuts, report.text()
    assert report.tally.backends_terminated >= plan.cuts, report.text()
    assert report.outcomes["completed"] == plan.jobs
    # Runs were repeated: more runs (claims) than jobs, some cut short by a kill ...
    runs = sum(n * c for n, c in report.executions_per_job.items())
    assert runs > plan.jobs, report.text()
    assert report.outcomes["stale-recovered"] >= 1, "no kill caught a run in flight"
    # ... and their effects were not: one row per job, the completing run's.
    assert report.effects_per_job == {1: plan.jobs}, report.text()


@pytest.mark.sqlite
@pytest.mark.skipif(is_postgres(), reason="SQLite's form: PostgreSQL runs the full one above")
@pytest.mark.timeout(600)
def test_atomic_task_effects_happen_exactly_once_on_sqlite(runworker: WorkerProcesses) -> None:
    """The same on SQLite, one writer at a time: kills and graceful stops (a file database
    has no connections to cut), fewer jobs and workers."""
    plan = Plan(jobs=400, workers=3, kills=8, stops=4, cuts=0, concurrency=2, atomic=True)
    report = Campaign(plan, runworker).run()
    print(report.text())

    assert report.violations == [], report.text()
    assert report.tally.kills == plan.kills, report.text()
    assert report.outcomes["completed"] == plan.jobs
    runs = sum(n * c for n, c in report.executions_per_job.items())
    assert runs > plan.jobs, report.text()
    assert report.effects_per_job == {1: plan.jobs}, report.text()


@postgres_only
@pytest.mark.skipif(not LONG, reason="the long form's: CI runs the two campaigns above")
@pytest.mark.timeout(900)
def test_chaos_campaign_loses_nothing_and_settles_every_run_once(
    runworker: WorkerProcesses,
) -> None:
    plan = Plan(jobs=JOBS, workers=4, kills=KILLS, stops=STOPS, cuts=CUTS)
    report = Campaign(plan, runworker).run()
    print(report.text())

    # The faults really happened, while there was work to cut short.
    assert_unbroken_under_every_fault(report, plan)
    assert report.tally.backends_terminated >= plan.cuts, report.text()
    assert report.outcomes["completed"] == plan.jobs
    assert report.outcomes["stale-recovered"] >= 1, "no kill caught a run in flight"
    assert sum(report.executions_per_job.values()) == plan.jobs
