"""A batch that ends two runs of one job: only the latest run can hold the claim.

Found by the model-based test (tests/model): a worker whose first claim of a job was
recovered, and that claimed the job again, settles both runs in one batch. The batch
kept the first settlement of each job and dropped the rest, so the earlier (lost) run
stood in the way of the current one: the job stayed claimed until its lease ran out
and was recovered as a failure, the completed run's result lost.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue import Status, store
from django_jobqueue.models import Job
from django_jobqueue.rules.lifecycle import Run, Settlement, completed
from django_jobqueue.store import ClaimRequest
from django_jobqueue.store.exchanging import turn_statement
from tests.helpers import journal_of, postgres_only
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _claimed_twice_by(worker: str) -> tuple[Settlement, Settlement]:
    """A job ``worker`` claimed, lost to stale recovery, and claimed again: each run's
    completing settlement, the lost run's first."""
    handle = tasks.add.enqueue(1, 2)
    [first] = store.claim_jobs(
        worker_id=worker, request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind])
    )
    later = timezone.now() + timedelta(hours=1)
    assert store.recover_expired(now=later) == 1
    [second] = store.claim_jobs(
        worker_id=worker, request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind], now=later)
    )
    assert (first.id, second.id) == (handle.id, handle.id)
    assert (first.run_count, second.run_count) == (1, 2)
    return tuple(  # type: ignore[return-value]
        completed(Run(job_id=c.id, kind=c.kind, run_no=c.run_count, worker=worker), result=n)
        for n, c in enumerate([first, second], start=1)
    )


@pytest.mark.parametrize("order", ["lost run first", "current run first"])
def test_settle_applies_the_current_run_when_a_lost_run_of_the_job_is_in_the_batch(
    order: str,
) -> None:
    lost, current = _claimed_twice_by("w:1")
    batch = [lost, current] if order == "lost run first" else [current, lost]

    applied = store.settle(worker_id="w:1", settlements=batch)

    assert applied == [s is current for s in batch]
    job = Job.objects.get(id=current.job_id)
    assert (job.status, job.result, job.run_count) == (Status.COMPLETED, 2, 2)
    assert [(e.outcome, e.run_no) for e in journal_of(job.id)] == [
        ("stale-recovered", 1),
        ("completed", 2),
    ]


def test_a_repeat_of_the_same_settlement_is_applied_once() -> None:
    _, current = _claimed_twice_by("w:1")
    assert store.settle(worker_id="w:1", settlements=[current, current]) == [True, False]
    assert [e.outcome for e in journal_of(current.job_id)] == ["stale-recovered", "completed"]


def test_a_turn_applies_the_current_run_when_a_lost_run_of_the_job_is_in_the_batch() -> None:
    """The same through the worker's one-statement turn (settle and claim together)."""
    lost, current = _claimed_twice_by("w:1")
    applied, claimed = store.exchange(
        worker_id="w:1",
        settlements=[lost, current],
        request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind]),
    )
    assert applied == [False, True]
    assert claimed == []
    assert Job.objects.get(id=current.job_id).status == Status.COMPLETED


@postgres_only
def test_a_turn_sends_its_settled_ids_on_one_row_not_on_every_claimed_row() -> None:
    """The turn's statement returns a row per claimed job; the settled ids come once
    (a turn of n settlements and n claims sent n² ids, each parsed by the worker)."""
    handles = tasks.add.enqueue_many([{"a": i, "b": 1} for i in range(12)])
    claimed = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=5, kinds=[tasks.add.kind])
    )
    batch = [
        completed(Run(job_id=c.id, kind=c.kind, run_no=c.run_count, worker="w:1"), result=0)
        for c in claimed
    ]
    built = turn_statement(
        worker_id="w:1", settlements=batch, request=ClaimRequest(limit=6, kinds=[tasks.add.kind])
    )
    assert built is not None
    with connection.cursor() as cursor:
        cursor.execute(*built)
        rows = cursor.fetchall()
    assert len(rows) == 6
    assert [len(r[0]) for r in rows if r[0] is not None] == [5]
    assert {str(i) for r in rows if r[0] for i in r[0]} == {str(c.id) for c in claimed}
    assert len({r[1] for r in rows}) == 6
    assert {r[1] for r in rows} <= {h.id for h in handles}


@postgres_only
def test_a_turn_that_claims_nothing_still_reports_what_it_settled() -> None:
    tasks.add.enqueue(1, 2)
    claimed = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind])
    )
    batch = [
        completed(Run(job_id=c.id, kind=c.kind, run_no=c.run_count, worker="w:1"), result=3)
        for c in claimed
    ]
    applied, more = store.exchange(
        worker_id="w:1",
        settlements=batch,
        request=store.ClaimRequest(limit=4, kinds=[tasks.add.kind]),
    )
    assert (applied, more) == ([True], [])
    assert Job.objects.get(id=claimed[0].id).status == Status.COMPLETED
