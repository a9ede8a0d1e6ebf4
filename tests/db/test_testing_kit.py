"""django_jobqueue.testing works inside an ordinary (transaction-wrapped) test."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import TestCase
from django.utils import timezone

from django_jobqueue import InvalidArguments, Status
from django_jobqueue.ids import uuid7
from django_jobqueue.testing import (
    TooManyJobs,
    assert_enqueued,
    assert_not_enqueued,
    captured_jobs,
    run_jobs,
)
from tests.taskapp import tasks
from tests.taskapp.models import Effect

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_assert_enqueued_matches_kind_and_payload_subset() -> None:
    tasks.add.enqueue(1, 2)
    tasks.add.enqueue(1, 3)
    assert len(assert_enqueued(tasks.add, a=1)) == 2
    assert_enqueued(tasks.add, count=1, b=3)
    assert_enqueued("tests.taskapp.tasks.add", count=2)
    assert_not_enqueued(tasks.add, b=4)
    assert_not_enqueued(tasks.noop)
    with pytest.raises(AssertionError, match="expected 3 pending"):
        assert_enqueued(tasks.add, count=3)
    with pytest.raises(AssertionError, match="no pending"):
        assert_enqueued(tasks.noop)
    with pytest.raises(AssertionError, match="2 pending"):
        assert_not_enqueued(tasks.add, a=1)


def test_run_jobs_runs_inline_to_completion_and_returns_handles() -> None:
    handle = tasks.paginate.enqueue(pages=2)
    ran = run_jobs()
    assert [h.id for h in ran] == [handle.id, handle.id]
    assert [h.status for h in ran] == [Status.PENDING, Status.COMPLETED]
    assert handle.refresh().result == {"pages": 2}
    assert [e.outcome for e in handle.journal()] == ["paused", "completed"]


def test_run_jobs_with_a_later_clock_runs_scheduled_jobs() -> None:
    later = tasks.add.using(delay=timedelta(hours=2)).enqueue(1, 1)
    assert run_jobs() == []
    ran = run_jobs(now=timezone.now() + timedelta(hours=3))
    assert [h.id for h in ran] == [later.id]
    assert ran[0].status == Status.COMPLETED


def test_run_jobs_can_be_limited_to_kinds() -> None:
    a = tasks.add.enqueue(1, 1)
    n = tasks.noop.enqueue()
    assert [h.id for h in run_jobs(kinds=[tasks.noop])] == [n.id]
    assert a.refresh().status == Status.PENDING


def test_captured_jobs_lists_what_the_block_enqueued_with_options_and_handles() -> None:
    tasks.noop.enqueue()  # before the block: not listed
    with captured_jobs() as jobs:
        first = tasks.add.using(queue="mail", priority=0, idempotency_key="k1").enqueue(1, 2)
        tasks.Sync(account_id=7).using(delay=timedelta(minutes=5)).enqueue()
        bulk = tasks.add.enqueue_many([{"a": 3, "b": 4}, {"a": 5, "b": 6}])
        with pytest.raises(InvalidArguments):
            tasks.add.enqueue(1)  # bad input: nothing enqueued, nothing listed
    tasks.noop.enqueue()  # after the block: not listed
    assert [(j.kind, j.payload) for j in jobs] == [
        (tasks.add.kind, {"a": 1, "b": 2}),
        ("tests.sync", {"account_id": 7, "full": False, "items": []}),
        (tasks.add.kind, {"a": 3, "b": 4}),
        (tasks.add.kind, {"a": 5, "b": 6}),
    ]
    assert jobs[0].options == {
        "queue": "mail",
        "priority": 0,
        "delay": None,
        "run_at": None,
        "idempotency_key": "k1",
        "dedup_key": None,
    }
    assert jobs[0].handle.id == first.id
    assert jobs[1].options["delay"] == timedelta(minutes=5)
    assert jobs[1].options["dedup_key"] == "7"
    assert [j.handle.id for j in jobs[2:]] == [h.id for h in bulk]


def test_captured_jobs_sees_jobs_that_jobs_enqueue() -> None:
    with captured_jobs() as jobs:
        tasks.countdown.enqueue(2)
        run_jobs()
    assert [j.payload["n"] for j in jobs] == [2, 1, 0]


def test_run_jobs_drains_jobs_that_jobs_enqueue() -> None:
    tasks.countdown.enqueue(3)
    ran = run_jobs()
    assert [h.result for h in ran] == [3, 2, 1, 0]
    assert_not_enqueued(tasks.countdown)


def test_run_jobs_raises_when_its_bound_is_exceeded() -> None:
    tasks.countdown.enqueue(10)
    with pytest.raises(TooManyJobs, match=r"ran max_jobs=4 jobs and jobs are still runnable"):
        run_jobs(max_jobs=4)
    assert_enqueued(tasks.countdown, count=1, n=6)
    assert len(run_jobs(max_jobs=7)) == 7  # exactly the bound, then nothing left: no error


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_run_jobs_refuses_a_bound_that_is_not_a_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_jobs must be a positive int"):
        run_jobs(max_jobs=bad)  # type: ignore[arg-type]


class CapturedInATestCase(TestCase):
    """The kit in a Django ``TestCase``: everything runs inside its transaction."""

    def test_capture_and_run(self) -> None:
        with captured_jobs() as jobs:
            tasks.countdown.enqueue(1)
        assert [j.payload for j in jobs] == [{"n": 1}]
        assert [h.result for h in run_jobs()] == [1, 0]


def test_run_jobs_rolls_back_a_block_a_run_leaves_open_and_the_test_goes_on() -> None:
    """The worker's connection guard, inside the test's transaction: only the block the
    run left open is rolled back (failing the run); the test's own stays open."""
    depth = len(connection.atomic_blocks)
    mine = Effect.objects.create(job_id=uuid7(), run_no=0)
    leak = tasks.leaks.enqueue(how="atomic")
    later = tasks.writes.enqueue()
    run_jobs()

    assert len(connection.atomic_blocks) == depth
    assert leak.refresh().status == Status.DEAD
    [entry] = leak.journal()
    assert "left a transaction open on 'default' (an atomic block" in entry.note
    assert "its uncommitted writes were rolled back" in entry.note
    assert not Effect.objects.filter(job_id=leak.id).exists()
    assert later.refresh().status == Status.COMPLETED
    assert Effect.objects.filter(job_id=later.id).count() == 1
    assert Effect.objects.filter(id=mine.id).exists()  # the test's transaction goes on


@pytest.mark.django_db(transaction=True)
def test_run_jobs_outside_a_transaction_cleans_up_a_leak_as_a_worker_does() -> None:
    leak = tasks.leaks.enqueue(how="autocommit")
    later = tasks.writes.enqueue()
    run_jobs()

    assert connection.get_autocommit()
    assert leak.refresh().status == Status.DEAD
    [entry] = leak.journal()
    assert "left a transaction open on 'default' (autocommit off)" in entry.note
    assert not Effect.objects.filter(job_id=leak.id).exists()
    assert later.refresh().status == Status.COMPLETED
    assert Effect.objects.filter(job_id=later.id).count() == 1
