"""Idempotency keys: reuse while the keyed job is active, a fresh row once it finished,
exactly one row under concurrent enqueues, and a caller's transaction left intact."""

from __future__ import annotations

import threading
import uuid
from functools import partial
from typing import Any

import pytest
from django.db import connections, transaction

import django_jobqueue
from django_jobqueue import InvalidOption, InvalidTransition, Status, store
from django_jobqueue.models import Job, JournalEntry
from tests.helpers import (
    backend_pid,
    in_thread,
    row_locking,
    run_burst,
    wait_for,
    waits_on_lock_held_by,
)
from tests.taskapp import tasks
from tests.taskapp.models import Execution

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = pytest.mark.django_db
sqlite_too = pytest.mark.sqlite


def row_state(job_id: uuid.UUID) -> tuple[Any, ...]:
    job = Job.objects.get(id=job_id)
    return (job.status, job.payload, job.priority, job.visible_at, job.carry, job.run_count)


@sqlite_too
def test_idempotency_key_reuses_the_pending_job_and_writes_nothing() -> None:
    first = tasks.add.using(idempotency_key="order-1").enqueue(1, 2)
    assert first.disposition == "inserted"
    before = row_state(first.id)

    again = tasks.add.using(idempotency_key="order-1", priority=0).enqueue(5, 6)

    assert again.disposition == "reused"
    assert again.id == first.id
    assert again.status == Status.PENDING
    assert again.job.payload == {"a": 1, "b": 2}  # the existing job, not the new arguments
    assert Job.objects.count() == 1
    assert row_state(first.id) == before
    assert JournalEntry.objects.count() == 0


@sqlite_too
def test_idempotency_key_reuses_a_claimed_job() -> None:
    first = tasks.add.using(idempotency_key="order-1").enqueue(1, 2)
    [claimed] = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[tasks.add.kind])
    )
    assert claimed.id == first.id

    again = tasks.add.using(idempotency_key="order-1").enqueue(1, 2)

    assert again.disposition == "reused"
    assert again.id == first.id
    assert again.status == Status.CLAIMED
    assert Job.objects.count() == 1
    assert JournalEntry.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@sqlite_too
@pytest.mark.parametrize("finish", ["completed", "cancelled", "dead"])
def test_idempotency_key_is_free_again_once_the_job_is_terminal(finish: str) -> None:
    if finish == "dead":
        first = tasks.permanent.using(idempotency_key="k").enqueue()
    else:
        first = tasks.add.using(idempotency_key="k").enqueue(1, 2)
    if finish == "cancelled":
        django_jobqueue.cancel(first.id)
    else:
        assert run_burst() == 1
    assert first.refresh().status == finish

    second = tasks.add.using(idempotency_key="k").enqueue(3, 4)

    assert second.disposition == "inserted"
    assert second.id != first.id
    rows = dict(Job.objects.filter(idempotency_key="k").values_list("id", "status"))
    assert rows == {first.id: finish, second.id: Status.PENDING}
    # ...and while the new one is active, the key points at it.
    third = tasks.add.using(idempotency_key="k").enqueue(5, 6)
    assert third.disposition == "reused"
    assert third.id == second.id


@sqlite_too
def test_idempotency_reuse_inside_a_callers_transaction_keeps_it_working() -> None:
    existing = tasks.add.using(idempotency_key="signup-9").enqueue(1, 2)

    with transaction.atomic():
        Execution.objects.create(job_id=existing.id, kind="business-data", run_no=0, pid=1)
        reused = tasks.add.using(idempotency_key="signup-9").enqueue(1, 2)
        other = tasks.noop.enqueue()

    assert reused.disposition == "reused"
    assert reused.id == existing.id
    assert Execution.objects.filter(kind="business-data").count() == 1
    assert Job.objects.filter(id=other.id, status=Status.PENDING).exists()
    assert Job.objects.count() == 2


@sqlite_too
def test_idempotency_key_is_rolled_back_with_the_callers_transaction() -> None:
    class Abort(Exception):
        pass

    def signup() -> None:
        with transaction.atomic():
            tasks.add.using(idempotency_key="k").enqueue(1, 2)
            raise Abort

    with pytest.raises(Abort):
        signup()

    assert Job.objects.count() == 0
    handle = tasks.add.using(idempotency_key="k").enqueue(1, 2)
    assert handle.disposition == "inserted"


@sqlite_too
@pytest.mark.parametrize("key", ["", "x" * 256, 42])
def test_idempotency_key_must_be_a_short_non_empty_string(key: Any) -> None:
    with pytest.raises(InvalidOption, match="idempotency_key"):
        tasks.add.using(idempotency_key=key).enqueue(1, 2)
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@sqlite_too
def test_requeue_is_refused_while_another_active_job_holds_the_key() -> None:
    dead = tasks.permanent.using(idempotency_key="k").enqueue()
    run_burst()
    assert dead.refresh().status == Status.DEAD
    active = tasks.add.using(idempotency_key="k").enqueue(1, 2)
    assert active.disposition == "inserted"

    with pytest.raises(InvalidTransition, match="idempotency key 'k'"):
        django_jobqueue.requeue(dead.id, actor="alice")

    assert dead.refresh().status == Status.DEAD
    assert [e.outcome for e in dead.journal()] == ["dead"]  # no requeued entry written


@pytest.mark.django_db(transaction=True)
@row_locking
def test_twenty_concurrent_enqueues_with_one_key_make_exactly_one_row() -> None:
    n = 20
    barrier = threading.Barrier(n)

    def one(i: int) -> Any:
        connections["default"].ensure_connection()  # connect before the race starts
        barrier.wait(timeout=30)
        return tasks.add.using(idempotency_key="charge-77").enqueue(i, i)

    futures = [in_thread(partial(one, i)) for i in range(n)]
    handles = [f.result(timeout=60) for f in futures]

    [row] = Job.objects.filter(idempotency_key="charge-77")
    assert Job.objects.count() == 1
    inserted = [h for h in handles if h.disposition == "inserted"]
    reused = [h for h in handles if h.disposition == "reused"]
    assert len(inserted) == 1
    assert len(reused) == n - 1
    assert inserted[0].id == row.id
    assert {h.id for h in reused} == {row.id}
    assert row.payload == inserted[0].job.payload
    assert JournalEntry.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@row_locking
def test_idempotency_race_lost_inside_a_callers_transaction_reuses_and_commits_the_rest() -> None:
    """The other enqueue has inserted the key but not committed when ours looks it up, so
    ours inserts too and blocks on the unique index. When the other commits, ours gets the
    unique violation: it must reuse the winner's job and leave the caller's transaction
    usable (a savepoint, not a broken transaction), so its other writes commit."""
    winner_inserted = threading.Event()
    commit = threading.Event()
    holder: list[int] = []
    loser: list[int] = []

    def winner() -> Any:
        holder.append(backend_pid())
        with transaction.atomic():
            handle = tasks.add.using(idempotency_key="signup-5").enqueue(1, 1)
            winner_inserted.set()
            assert commit.wait(30)
        return handle

    def caller() -> tuple[Any, Any]:
        loser.append(backend_pid())
        with transaction.atomic():
            Execution.objects.create(job_id=uuid.uuid4(), kind="business-data", run_no=0, pid=1)
            reused = tasks.add.using(idempotency_key="signup-5").enqueue(2, 2)
            other = tasks.noop.enqueue()
        return reused, other

    first = in_thread(winner)
    assert winner_inserted.wait(10)
    second = in_thread(caller)
    try:
        wait_for(lambda: loser and waits_on_lock_held_by(loser[0], holder[0]), timeout=30)
        assert not second.done()
    finally:
        commit.set()
    won = first.result(timeout=30)
    reused, other = second.result(timeout=30)

    assert won.disposition == "inserted"
    assert reused.disposition == "reused"
    assert reused.id == won.id
    assert Job.objects.filter(idempotency_key="signup-5").count() == 1
    assert Job.objects.get(id=won.id).payload == {"a": 1, "b": 1}
    assert Job.objects.filter(id=other.id, status=Status.PENDING).exists()
    assert Execution.objects.filter(kind="business-data").count() == 1


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_merged_request_hands_its_idempotency_key_to_the_surviving_job() -> None:
    tasks.MERGE_MODE["mode"] = "union"
    try:
        first = tasks.Sync(7, items=["a"]).enqueue()
        merged = tasks.Sync(7, items=["b"]).using(idempotency_key="sync-7-b").enqueue()
        assert merged.disposition == "merged"
        assert merged.id == first.id
        again = tasks.Sync(7, items=["b"]).using(idempotency_key="sync-7-b").enqueue()
        assert again.disposition == "reused"
        assert again.id == first.id
        assert Job.objects.get(id=first.id).carry == {"merged": 1}
        other = tasks.Sync(7, items=["c"]).using(idempotency_key="sync-7-c").enqueue()
        assert other.disposition == "inserted"  # the candidate answers to another key
        assert Job.objects.filter(kind="tests.sync").count() == 2
    finally:
        tasks.MERGE_MODE.clear()
