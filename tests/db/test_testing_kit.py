"""django_jobqueue.testing works inside an ordinary (transaction-wrapped) test."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import Status
from django_jobqueue.testing import assert_enqueued, assert_not_enqueued, run_jobs
from tests.taskapp import tasks

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
