"""Operator actions: cancel (pending at once, claimed via the running context) and requeue
(finished jobs back to pending), asserted on job rows and journal entries."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.utils import timezone

import django_jobqueue
from django_jobqueue import (
    InvalidTransition,
    JobNotFound,
    Status,
    cancel,
    job,
    requeue,
    store,
)
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import Settlement
from tests.helpers import WorkerThread, journal_of, run_burst, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def outcomes(job_id: uuid.UUID) -> list[str]:
    return [e.outcome for e in journal_of(job_id)]


@pytest.fixture
def ticket() -> Iterator[str]:
    """A ticket name for until_fixed; forgotten again after the test."""
    name = f"ticket-{uuid.uuid4().hex[:8]}"
    yield name
    tasks.FIXED.discard(name)


# --- cancel -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cancel_pending_job_is_immediate_and_journals_the_actor() -> None:
    handle = tasks.add.enqueue(1, 2)
    before = timezone.now()

    cancelled = django_jobqueue.cancel(handle.id, actor="alice")

    assert cancelled.status == Status.CANCELLED
    row = Job.objects.get(id=handle.id)
    assert row.status == Status.CANCELLED
    assert row.finished_at is not None
    assert row.finished_at >= before
    assert row.cancel_requested is False
    [entry] = journal_of(handle.id)
    assert entry.outcome == "cancelled"
    assert entry.actor == "alice"
    assert entry.note == "cancelled while pending by alice"
    # A worker never runs it.
    assert run_burst() == 0
    assert Job.objects.get(id=handle.id).status == Status.CANCELLED


def test_cancel_without_an_actor_through_the_public_api() -> None:
    handle = tasks.noop.enqueue()

    cancel(str(handle.id))

    assert job(handle.id).status == Status.CANCELLED
    [entry] = job(handle.id).journal()
    assert entry.outcome == "cancelled"
    assert entry.actor == ""
    assert entry.note == "cancelled while pending"


def test_cancel_of_a_cancelled_job_is_a_no_op() -> None:
    handle = tasks.noop.enqueue()
    cancel(handle.id, actor="alice")
    finished_at = Job.objects.get(id=handle.id).finished_at

    again = cancel(handle.id, actor="bob")

    assert again.status == Status.CANCELLED
    assert Job.objects.get(id=handle.id).finished_at == finished_at
    assert [(e.outcome, e.actor) for e in journal_of(handle.id)] == [("cancelled", "alice")]


def test_cancel_claimed_job_marks_it_and_a_failed_run_settles_cancelled_not_retried() -> None:
    handle = tasks.add.enqueue(1, 2)
    [claimed] = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind])
    )

    django_jobqueue.cancel(handle.id, actor="alice")
    django_jobqueue.cancel(handle.id, actor="bob")  # already requested: the first actor stays

    row = Job.objects.get(id=handle.id)
    assert row.status == Status.CLAIMED
    assert row.cancel_requested is True
    assert row.cancel_actor == "alice"
    assert outcomes(handle.id) == []  # nothing journalled until the run ends
    assert store.cancel_requested(job_ids=[handle.id]) == {handle.id}

    # The run then fails in a way that would normally retry it.
    retry = Settlement(
        job_id=claimed.id,
        kind=claimed.kind,
        run_no=claimed.run_count,
        outcome="retried",
        status=Status.PENDING,
        visible_at=timezone.now(),
        failed=True,
        carry={"step": 2},
        note="RuntimeError: boom",
    )
    assert store.settle(worker_id="w:1", settlements=[retry]) == [True]

    row.refresh_from_db()
    assert row.status == Status.CANCELLED
    assert row.finished_at is not None
    assert row.failure_count == 1
    assert row.carry == {"step": 2}
    [entry] = journal_of(handle.id)
    assert entry.outcome == "cancelled"
    assert entry.actor == "alice"
    assert entry.note.startswith("cancelled on request (run ended: retried)")
    assert "RuntimeError: boom" in entry.note


@pytest.mark.django_db(transaction=True)
def test_cancel_of_a_running_cooperative_job_ends_it_cancelled_within_five_seconds(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = tasks.cooperative.enqueue(seconds=60)
    worker_thread(concurrency=2)
    wait_for(lambda: Execution.objects.filter(job_id=handle.id).exists(), timeout=15)
    assert Job.objects.get(id=handle.id).status == Status.CLAIMED

    started = time.monotonic()
    django_jobqueue.cancel(handle.id, actor="alice")
    wait_for(
        lambda: Job.objects.filter(id=handle.id, status=Status.CANCELLED).exists(),
        timeout=5,
        interval=0.02,
    )
    elapsed = time.monotonic() - started

    print(f"cancel of a running job: cancelled after {elapsed:.2f}s")
    assert elapsed < 5, f"cancel took {elapsed:.2f}s"
    row = Job.objects.get(id=handle.id)
    assert row.run_count == 1
    assert row.claimed_by == ""
    assert row.cancel_requested is False
    assert row.carry["steps"] > 0  # the run's progress, saved as it stopped early
    [entry] = journal_of(handle.id)
    assert entry.outcome == "cancelled"
    assert entry.actor == "alice"
    assert entry.note.startswith("cancelled on request (run ended: paused)")
    assert entry.run_no == 1
    assert Execution.objects.filter(job_id=handle.id).count() == 1  # not run again
    # The worker goes on with other work.
    after = tasks.add.enqueue(2, 2)
    wait_for(lambda: Job.objects.filter(id=after.id, status=Status.COMPLETED).exists())


@pytest.mark.django_db(transaction=True)
def test_cancel_of_a_running_job_that_then_completes_leaves_it_completed(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = tasks.stubborn.enqueue(seconds=1.5)
    worker_thread(concurrency=1)
    wait_for(lambda: Execution.objects.filter(job_id=handle.id).exists(), timeout=15)

    django_jobqueue.cancel(handle.id, actor="alice")
    wait_for(lambda: Job.objects.filter(id=handle.id, status=Status.COMPLETED).exists())

    row = Job.objects.get(id=handle.id)
    assert row.result == "done"
    assert row.cancel_requested is False
    assert outcomes(handle.id) == ["completed"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("status", ["completed", "dead"])
def test_cancel_of_a_finished_job_is_refused(status: str) -> None:
    handle = tasks.add.enqueue(1, 2) if status == "completed" else tasks.permanent.enqueue()
    run_burst()
    row = Job.objects.get(id=handle.id)
    assert row.status == status
    entries = outcomes(handle.id)

    with pytest.raises(InvalidTransition, match=f"is {status}") as info:
        cancel(handle.id, actor="alice")

    assert info.value.facts["status"] == status
    after = Job.objects.get(id=handle.id)
    assert (after.status, after.finished_at) == (row.status, row.finished_at)
    assert outcomes(handle.id) == entries


@pytest.mark.parametrize("job_id", [uuid.UUID(int=12345), "not-a-uuid"])
def test_cancel_and_requeue_of_an_unknown_id_raise_job_not_found(job_id: Any) -> None:
    with pytest.raises(JobNotFound):
        cancel(job_id)
    with pytest.raises(JobNotFound):
        requeue(job_id)
    with pytest.raises(JobNotFound):
        job(job_id)
    assert JournalEntry.objects.count() == 0


# --- requeue ------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_requeue_brings_a_dead_job_back_and_it_completes(ticket: str) -> None:
    handle = tasks.until_fixed.enqueue(ticket)
    run_burst()
    dead = Job.objects.get(id=handle.id)
    assert dead.status == Status.DEAD
    assert dead.failure_count == 1
    assert dead.carry == {"prepared": 1}
    assert outcomes(handle.id) == ["paused", "dead"]

    tasks.FIXED.add(ticket)  # the operator fixes the cause, then requeues
    before = timezone.now()
    returned = requeue(handle.id, actor="bob")

    assert returned.status == Status.PENDING
    row = Job.objects.get(id=handle.id)
    assert row.status == Status.PENDING
    assert row.failure_count == 0
    assert row.carry == {"prepared": 1}  # carry kept
    assert row.finished_at is None
    assert row.result is None
    assert before <= row.visible_at <= timezone.now()
    assert row.run_count == 2  # the claim epoch goes on
    last = journal_of(handle.id)[-1]
    assert (last.outcome, last.actor, last.note) == ("requeued", "bob", "requeued from dead by bob")

    assert run_burst() == 1
    done = Job.objects.get(id=handle.id)
    assert done.status == Status.COMPLETED
    assert done.result == {"prepared_in_run": 1, "run": 3}
    assert outcomes(handle.id) == ["paused", "dead", "requeued", "completed"]
    assert [e.run_no for e in journal_of(handle.id)] == [1, 2, 2, 3]
    assert Execution.objects.filter(job_id=handle.id).count() == 3


@pytest.mark.django_db(transaction=True)
def test_requeue_brings_a_cancelled_job_back() -> None:
    handle = tasks.add.enqueue(2, 5)
    cancel(handle.id, actor="alice")

    requeue(handle.id, actor="bob")

    assert Job.objects.get(id=handle.id).status == Status.PENDING
    assert run_burst() == 1
    row = Job.objects.get(id=handle.id)
    assert (row.status, row.result) == (Status.COMPLETED, 7)
    journal = journal_of(handle.id)
    assert [(e.outcome, e.actor) for e in journal] == [
        ("cancelled", "alice"),
        ("requeued", "bob"),
        ("completed", ""),
    ]
    assert journal[1].note == "requeued from cancelled by bob"


@pytest.mark.django_db(transaction=True)
def test_requeue_of_a_completed_job_needs_force() -> None:
    handle = tasks.add.enqueue(1, 2)
    run_burst()
    row = Job.objects.get(id=handle.id)
    assert row.status == Status.COMPLETED

    with pytest.raises(InvalidTransition, match="requeue it with force"):
        requeue(handle.id)
    after = Job.objects.get(id=handle.id)
    assert (after.status, after.result, after.finished_at) == (
        Status.COMPLETED,
        3,
        row.finished_at,
    )
    assert outcomes(handle.id) == ["completed"]

    requeue(handle.id, force=True, actor="carol")
    forced = Job.objects.get(id=handle.id)
    assert forced.status == Status.PENDING
    assert forced.result is None
    assert forced.finished_at is None
    assert journal_of(handle.id)[-1].note == "requeued from completed by carol"
    assert run_burst() == 1
    assert Job.objects.get(id=handle.id).result == 3
    assert outcomes(handle.id) == ["completed", "requeued", "completed"]


@pytest.mark.parametrize("status", ["pending", "claimed"])
def test_requeue_of_an_active_job_is_refused(status: str) -> None:
    handle = tasks.add.enqueue(1, 2)
    if status == "claimed":
        store.claim_jobs(
            worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind])
        )
    before = Job.objects.get(id=handle.id)
    assert before.status == status

    with pytest.raises(InvalidTransition, match="only finished jobs can be requeued"):
        requeue(handle.id, force=True)

    after = Job.objects.get(id=handle.id)
    assert (after.status, after.run_count, after.visible_at) == (
        before.status,
        before.run_count,
        before.visible_at,
    )
    assert outcomes(handle.id) == []
