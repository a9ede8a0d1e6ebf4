"""Merge-on-enqueue: each decision, the pending-only candidacy, the claimed-meanwhile
fallback, merge errors that write nothing, and concurrent enqueues that lose no payload."""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone

import django_jobqueue
from django_jobqueue import EnqueueError, MergeError, Priority, Status, enqueue, store
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import Settlement
from tests.helpers import (
    backend_pid,
    in_thread,
    journal_of,
    row_locking,
    run_burst,
    wait_for,
    waits_on_lock_held_by,
)
from tests.taskapp import tasks
from tests.taskapp.tasks import ClaimingSync, Sync

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = pytest.mark.django_db
sqlite_too = pytest.mark.sqlite


@pytest.fixture
def merge_mode(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Set how Sync.merge decides; restored after the test."""

    def set_mode(mode: str) -> None:
        monkeypatch.setitem(tasks.MERGE_MODE, "mode", mode)

    return set_mode


def outcomes(job_id: uuid.UUID) -> list[str]:
    return [e.outcome for e in journal_of(job_id)]


def snapshot(job_id: uuid.UUID) -> dict[str, Any]:
    row = Job.objects.get(id=job_id)
    return {
        "status": row.status,
        "payload": row.payload,
        "carry": row.carry,
        "priority": row.priority,
        "visible_at": row.visible_at,
        "run_count": row.run_count,
        "journal": [(e.id, e.outcome, e.note) for e in journal_of(job_id)],
    }


def pending_with_history(account_id: int = 7, items: list[str] | None = None) -> Job:
    """A pending Sync job that already ran once (paused with carry): it has a journal."""
    handle = Sync(account_id, items=items or ["a"]).enqueue()
    [claimed] = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[Sync.kind])
    )
    assert claimed.id == handle.id
    [applied] = store.settle(
        worker_id="w:1",
        settlements=[
            Settlement(
                job_id=claimed.id,
                kind=claimed.kind,
                run_no=claimed.run_count,
                outcome="paused",
                status=Status.PENDING,
                visible_at=timezone.now(),
                carry={"cursor": 3},
                note="page 1",
            )
        ],
    )
    assert applied
    job = Job.objects.get(id=handle.id)
    assert job.status == Status.PENDING
    assert job.carry == {"cursor": 3}
    assert outcomes(job.id) == ["paused"]
    return job


# --- each decision ------------------------------------------------------------------------


@sqlite_too
def test_merge_keep_leaves_the_pending_job_as_it_is_and_journals_the_merge(
    merge_mode: Callable[[str], None],
) -> None:
    merge_mode("keep")
    job = pending_with_history()
    before = snapshot(job.id)

    handle = Sync(7, items=["b"]).enqueue()

    assert handle.disposition == "merged"
    assert handle.id == job.id
    assert Job.objects.filter(kind=Sync.kind).count() == 1
    after = snapshot(job.id)
    assert after["payload"] == before["payload"] == {"account_id": 7, "full": False, "items": ["a"]}
    assert after["carry"] == {"cursor": 3}
    assert after["priority"] == before["priority"]
    assert after["visible_at"] == before["visible_at"]
    assert after["status"] == Status.PENDING
    # The old journal is kept, the merge appended after it.
    assert after["journal"][:1] == before["journal"]
    merged = journal_of(job.id)[-1]
    assert merged.outcome == "merged"
    assert merged.note == "merge: keep"
    assert merged.attachment == {"incoming": {"account_id": 7, "full": False, "items": ["b"]}}
    assert merged.run_no == 1


@sqlite_too
def test_merge_replace_takes_the_incoming_payload_and_resets_carry(
    merge_mode: Callable[[str], None],
) -> None:
    merge_mode("replace")
    job = pending_with_history()

    handle = Sync(7, full=True, items=["b"]).enqueue()

    assert handle.disposition == "merged"
    assert handle.id == job.id
    assert handle.job.payload == {"account_id": 7, "full": True, "items": ["b"]}
    row = Job.objects.get(id=job.id)
    assert row.payload == {"account_id": 7, "full": True, "items": ["b"]}
    assert row.carry == {}
    assert row.status == Status.PENDING
    assert row.run_count == 1
    assert Job.objects.filter(kind=Sync.kind).count() == 1
    assert outcomes(job.id) == ["paused", "merged"]
    assert journal_of(job.id)[-1].note == "merge: replace"


@sqlite_too
def test_merge_with_sets_the_computed_payload_and_carry(
    merge_mode: Callable[[str], None],
) -> None:
    merge_mode("union")
    job = pending_with_history(items=["a", "c"])

    handle = Sync(7, items=["b"]).enqueue()

    assert handle.disposition == "merged"
    assert handle.id == job.id
    row = Job.objects.get(id=job.id)
    assert row.payload == {"account_id": 7, "full": False, "items": ["a", "b", "c"]}
    # Sync.merge keeps the existing carry and counts merges in it.
    assert row.carry == {"cursor": 3, "merged": 1}
    assert outcomes(job.id) == ["paused", "merged"]
    assert journal_of(job.id)[-1].note == "merge: with"

    # A second merge sees the first one's result (payload and carry) as "existing".
    again = Sync(7, full=True, items=["d"]).enqueue()
    assert again.id == job.id
    row.refresh_from_db()
    assert row.payload == {"account_id": 7, "full": True, "items": ["a", "b", "c", "d"]}
    assert row.carry == {"cursor": 3, "merged": 2}
    assert outcomes(job.id) == ["paused", "merged", "merged"]


@sqlite_too
def test_merge_independent_inserts_a_second_row(merge_mode: Callable[[str], None]) -> None:
    merge_mode("independent")
    job = pending_with_history()
    before = snapshot(job.id)

    handle = Sync(7, items=["b"]).enqueue()

    assert handle.disposition == "inserted"
    assert handle.id != job.id
    rows = Job.objects.filter(kind=Sync.kind, dedup_key="7").order_by("created_at", "id")
    assert [r.id for r in rows] == [job.id, handle.id]
    assert rows[1].payload == {"account_id": 7, "full": False, "items": ["b"]}
    assert rows[1].status == Status.PENDING
    assert snapshot(job.id) == before  # no merged entry on the first job
    assert outcomes(handle.id) == []


@sqlite_too
def test_merge_goes_into_the_oldest_pending_job_of_the_key(
    merge_mode: Callable[[str], None],
) -> None:
    merge_mode("independent")
    first = Sync(7, items=["a"]).enqueue()
    second = Sync(7, items=["b"]).enqueue()
    other_key = Sync(8, items=["x"]).enqueue()
    assert first.disposition == second.disposition == other_key.disposition == "inserted"

    merge_mode("union")
    handle = Sync(7, items=["c"]).enqueue()

    assert handle.id == first.id
    assert Job.objects.get(id=first.id).payload["items"] == ["a", "c"]
    assert Job.objects.get(id=second.id).payload["items"] == ["b"]
    assert Job.objects.get(id=other_key.id).payload["items"] == ["x"]
    assert outcomes(second.id) == outcomes(other_key.id) == []


@sqlite_too
@pytest.mark.parametrize("mode", ["replace", "union"])
def test_merge_replace_or_with_at_higher_priority_raises_the_rows_priority(
    merge_mode: Callable[[str], None], mode: str
) -> None:
    merge_mode(mode)
    job = pending_with_history()
    assert job.priority == Priority.NORMAL

    lower = Sync(7, items=["b"]).using(priority=Priority.LOW).enqueue()
    assert lower.id == job.id
    assert Job.objects.get(id=job.id).priority == Priority.NORMAL  # never lowered

    higher = Sync(7, items=["c"]).using(priority=Priority.HIGH).enqueue()
    assert higher.id == job.id
    assert higher.disposition == "merged"
    assert Job.objects.get(id=job.id).priority == Priority.HIGH
    assert outcomes(job.id) == ["paused", "merged", "merged"]


@sqlite_too
def test_merge_keep_does_not_change_priority_or_schedule(
    merge_mode: Callable[[str], None],
) -> None:
    merge_mode("keep")
    handle = Sync(7).using(delay=timedelta(hours=1)).enqueue()
    before = snapshot(handle.id)

    merged = Sync(7).using(priority=Priority.HIGH).enqueue()

    assert merged.id == handle.id
    after = snapshot(handle.id)
    assert after["priority"] == before["priority"] == Priority.NORMAL
    assert after["visible_at"] == before["visible_at"]


@sqlite_too
def test_merge_replace_makes_a_delayed_job_visible_as_early_as_the_incoming_one(
    merge_mode: Callable[[str], None],
) -> None:
    merge_mode("replace")
    delayed = Sync(7).using(delay=timedelta(hours=1)).enqueue()
    assert delayed.job.visible_at > timezone.now() + timedelta(minutes=59)

    now_ish = timezone.now()
    handle = Sync(7, items=["b"]).enqueue()

    assert handle.id == delayed.id
    assert Job.objects.get(id=delayed.id).visible_at <= now_ish + timedelta(seconds=5)


# --- candidacy ----------------------------------------------------------------------------


@sqlite_too
def test_merge_ignores_a_claimed_job_with_the_same_key(merge_mode: Callable[[str], None]) -> None:
    merge_mode("union")
    running = Sync(7, items=["a"]).enqueue()
    [claimed] = store.claim_jobs(
        worker_id="w:1", request=store.ClaimRequest(limit=1, kinds=[Sync.kind])
    )
    assert claimed.id == running.id

    handle = Sync(7, items=["b"]).enqueue()

    assert handle.disposition == "inserted"
    assert handle.id != running.id
    row = Job.objects.get(id=running.id)
    assert row.status == Status.CLAIMED
    assert row.payload["items"] == ["a"]
    assert outcomes(running.id) == []
    assert Job.objects.get(id=handle.id).payload["items"] == ["b"]


@pytest.mark.django_db(transaction=True)
@sqlite_too
def test_merge_ignores_finished_jobs_with_the_same_key(merge_mode: Callable[[str], None]) -> None:
    merge_mode("union")
    completed = Sync(7, items=["a"]).enqueue()
    assert run_burst() == 1
    cancelled = Sync(7, items=["b"]).enqueue()
    assert cancelled.disposition == "inserted"
    django_jobqueue.cancel(cancelled.id)

    handle = Sync(7, items=["c"]).enqueue()

    assert handle.disposition == "inserted"
    assert handle.id not in (completed.id, cancelled.id)
    assert Job.objects.get(id=completed.id).status == Status.COMPLETED
    assert Job.objects.get(id=cancelled.id).status == Status.CANCELLED
    assert outcomes(completed.id) == ["completed"]
    assert outcomes(cancelled.id) == ["cancelled"]


@sqlite_too
def test_merge_falls_back_to_insert_when_the_candidate_is_claimed_while_merge_decides() -> None:
    """ClaimingSync.merge() claims the candidate before returning replace: the guarded
    write (status still pending) finds nothing, so enqueue inserts a fresh job instead."""
    first = ClaimingSync(1).enqueue()
    assert first.disposition == "inserted"

    handle = ClaimingSync(1).enqueue()

    assert handle.disposition == "inserted"
    assert handle.id != first.id
    claimed = Job.objects.get(id=first.id)
    assert claimed.status == Status.CLAIMED
    assert claimed.claimed_by == "interloper:1"
    assert outcomes(first.id) == []  # no merged entry on a job that was not merged
    fresh = Job.objects.get(id=handle.id)
    assert fresh.status == Status.PENDING
    assert fresh.dedup_key == "1"


@pytest.mark.django_db(transaction=True)
@row_locking
def test_merge_falls_back_to_insert_when_another_session_claims_the_candidate_first(
    merge_mode: Callable[[str], None],
) -> None:
    """A worker's claim transaction has the candidate locked and updated to claimed but
    not committed; the enqueue's candidate lookup blocks on that row lock (seen in
    pg_stat_activity, or sys.innodb_lock_waits). When the claim commits, the lookup
    re-checks the row, finds it no longer pending, and the enqueue inserts a fresh job."""
    merge_mode("union")
    candidate = Sync(7, items=["a"]).enqueue()
    claimed_in_tx = threading.Event()
    commit = threading.Event()
    holder_pid: list[int] = []

    def claim_and_hold() -> list[Job]:
        holder_pid.append(backend_pid())
        with transaction.atomic():
            jobs = store.claim_jobs(
                worker_id="w:slow", request=store.ClaimRequest(limit=1, kinds=[Sync.kind])
            )
            claimed_in_tx.set()
            assert commit.wait(30)
        return jobs

    enqueuer_pid: list[int] = []

    def enqueue_sync() -> Any:
        enqueuer_pid.append(backend_pid())
        return Sync(7, items=["b"]).enqueue()

    claim = in_thread(claim_and_hold)
    assert claimed_in_tx.wait(10)
    incoming = in_thread(enqueue_sync)
    try:
        wait_for(
            lambda: enqueuer_pid and waits_on_lock_held_by(enqueuer_pid[0], holder_pid[0]),
            timeout=30,  # a thread's first connection and query, on a loaded CI machine
        )
        assert not incoming.done()
    finally:
        commit.set()
    [claimed] = claim.result(timeout=30)
    handle = incoming.result(timeout=30)

    assert claimed.id == candidate.id
    assert handle.disposition == "inserted"
    assert handle.id != candidate.id
    row = Job.objects.get(id=candidate.id)
    assert row.status == Status.CLAIMED
    assert row.claimed_by == "w:slow"
    assert row.payload["items"] == ["a"]
    assert outcomes(candidate.id) == []
    fresh = Job.objects.get(id=handle.id)
    assert fresh.status == Status.PENDING
    assert fresh.payload["items"] == ["b"]


# --- merge errors -------------------------------------------------------------------------


@sqlite_too
@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("raise", "merge() raised RuntimeError: merge exploded"),
        ("bad", "must return a Merge"),
        ("bad carry", "merge() returned a carry that is not JSON-serialisable"),
    ],
)
def test_merge_that_raises_or_returns_a_non_merge_is_an_enqueue_error_writing_nothing(
    merge_mode: Callable[[str], None], mode: str, message: str
) -> None:
    job = pending_with_history()
    before = snapshot(job.id)
    jobs_before = Job.objects.count()
    entries_before = JournalEntry.objects.count()
    merge_mode(mode)

    with pytest.raises(MergeError, match=re.escape(message)) as info:
        enqueue(Sync(7, items=["b"]))

    assert isinstance(info.value, EnqueueError)
    assert info.value.facts["kind"] == Sync.kind
    assert Job.objects.count() == jobs_before
    assert JournalEntry.objects.count() == entries_before
    assert snapshot(job.id) == before


@sqlite_too
def test_merge_error_inside_an_outer_transaction_writes_nothing_and_the_outer_commits(
    merge_mode: Callable[[str], None],
) -> None:
    job = pending_with_history()
    before = snapshot(job.id)
    merge_mode("raise")

    with transaction.atomic():
        first = tasks.add.enqueue(1, 2)
        with pytest.raises(MergeError):
            Sync(7, items=["b"]).enqueue()
        # The caller's transaction is intact: it goes on and commits more work.
        second = tasks.add.enqueue(3, 4)
        merge_mode("union")
        merged = Sync(7, items=["c"]).enqueue()

    assert Job.objects.filter(id__in=[first.id, second.id], status=Status.PENDING).count() == 2
    assert merged.id == job.id
    after = snapshot(job.id)
    assert after["payload"]["items"] == ["a", "c"]  # "b" from the failed merge is nowhere
    assert [outcome for _, outcome, _ in after["journal"]] == ["paused", "merged"]
    assert after["journal"][0] == before["journal"][0]
    assert Job.objects.filter(kind=Sync.kind).count() == 1


@sqlite_too
def test_merge_with_a_task_of_another_kind_is_a_merge_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = Sync(7, items=["a"]).enqueue()
    entries_before = JournalEntry.objects.count()

    def wrong_kind(self: Sync, existing: Any) -> Any:
        from django_jobqueue import Merge

        return Merge.with_(ClaimingSync(7))

    monkeypatch.setattr(Sync, "merge", wrong_kind)
    with pytest.raises(MergeError, match=re.escape("needs a tests.sync task")):
        Sync(7, items=["b"]).enqueue()

    assert Job.objects.count() == 1
    assert JournalEntry.objects.count() == entries_before
    assert Job.objects.get(id=job.id).payload["items"] == ["a"]


# --- concurrency --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@row_locking
@pytest.mark.parametrize("seeded", [False, True], ids=["no-candidate", "pending-candidate"])
def test_concurrent_enqueues_with_one_dedup_key_never_lose_a_payload(
    merge_mode: Callable[[str], None], monkeypatch: pytest.MonkeyPatch, seeded: bool
) -> None:
    """10 threads enqueue Sync(1, items=[i]) at once (union merges). Without a candidate
    they race to insert; with a pending candidate all ten merge into it. merge() is
    slowed down so that merges which did not wait for one another would overwrite each
    other's items for sure. The pending jobs together must hold every item exactly once."""
    merge_mode("union")
    original_merge = Sync.merge

    def slow_merge(self: Sync, existing: Any) -> Any:
        time.sleep(0.02)
        return original_merge(self, existing)

    monkeypatch.setattr(Sync, "merge", slow_merge)
    seed = Sync(1, items=["seed"]).enqueue() if seeded else None
    n = 10
    barrier = threading.Barrier(n)

    def one(i: int) -> Any:
        connections["default"].ensure_connection()
        barrier.wait(timeout=30)
        return Sync(1, items=[str(i)]).enqueue()

    futures = [in_thread(partial(one, i)) for i in range(n)]
    handles = [f.result(timeout=60) for f in futures]

    pending = list(Job.objects.filter(kind=Sync.kind, status=Status.PENDING))
    assert Job.objects.filter(kind=Sync.kind).count() == len(pending) >= 1
    items = sorted(item for job in pending for item in job.payload["items"])
    expected = sorted([str(i) for i in range(n)] + (["seed"] if seeded else []))
    assert items == expected  # each item exactly once, none lost
    inserted = [h for h in handles if h.disposition == "inserted"]
    merged = [h for h in handles if h.disposition == "merged"]
    assert len(inserted) + len(merged) == n
    if seed is not None:
        assert merged == handles  # a pending candidate existed for every one of them
        assert [job.id for job in pending] == [seed.id]
    else:
        assert {h.id for h in inserted} == {job.id for job in pending}
    # Every merge is journalled once, on the job that absorbed it, and counted in its carry.
    entries = JournalEntry.objects.filter(kind=Sync.kind, outcome="merged")
    assert entries.count() == len(merged)
    assert sum(job.carry.get("merged", 0) for job in pending) == len(merged)
    assert {h.id for h in handles} <= {job.id for job in pending}


@sqlite_too
def test_merge_tries_every_candidate_oldest_first(merge_mode: Callable[[str], None]) -> None:
    """The oldest pending job answers to another idempotency key, so it cannot take this
    request; the younger one can, and does (the lookup does not stop at the first)."""
    merge_mode("independent")
    oldest = Sync(7, items=["a"]).using(idempotency_key="order-1").enqueue()
    younger = Sync(7, items=["b"]).enqueue()
    assert younger.disposition == "inserted"
    merge_mode("union")

    handle = Sync(7, items=["c"]).using(idempotency_key="order-2").enqueue()

    assert handle.disposition == "merged"
    assert handle.id == younger.id
    assert Job.objects.get(id=younger.id).payload["items"] == ["b", "c"]
    assert Job.objects.get(id=younger.id).idempotency_key == "order-2"
    assert Job.objects.get(id=oldest.id).payload["items"] == ["a"]
    assert outcomes(oldest.id) == []
    assert outcomes(younger.id) == ["merged"]
    assert Job.objects.count() == 2


def _burst_of_one_key(enqueue_one: Callable[[int], Any], n: int) -> list[Any]:
    """``n`` threads, each on its own connection and in its own transaction, enqueue at
    once (a barrier starts them together); their handles."""
    barrier = threading.Barrier(n)

    def one(i: int) -> Any:
        connections["default"].ensure_connection()
        barrier.wait(timeout=30)
        with transaction.atomic():
            return enqueue_one(i)

    futures = [in_thread(partial(one, i)) for i in range(n)]
    return [f.result(timeout=120) for f in futures]


@sqlite_too
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("policy", ["debounce", "union"])
def test_a_burst_of_one_dedup_key_leaves_one_pending_job_and_n_minus_1_merges(
    merge_mode: Callable[[str], None], policy: str
) -> None:
    """8 threads × 6 trials enqueue one kind and dedup key at once, debounced or merged
    with a plain merge() policy: each trial leaves exactly one pending job, and its
    journal holds the 7 other enqueues as merges (issue 30: 1 to 8 pending before)."""
    merge_mode("union")
    n = 8
    for trial in range(6):
        key = f"burst-{trial}"
        if policy == "debounce":
            bound = tasks.keyed.using(dedup_key=key, debounce=timedelta(seconds=5))
            kind = tasks.keyed.kind
            handles = _burst_of_one_key(lambda i, bound=bound: bound.enqueue(n=i), n)
            pending = Job.objects.filter(kind=kind, dedup_key=key, status=Status.PENDING)
        else:
            kind = Sync.kind
            handles = _burst_of_one_key(
                lambda i, trial=trial: Sync(100 + trial, items=[str(i)]).enqueue(), n
            )
            pending = Job.objects.filter(
                kind=kind, dedup_key=str(100 + trial), status=Status.PENDING
            )
        assert pending.count() == 1, f"trial {trial}: {pending.count()} pending jobs"
        job = pending.get()
        assert sorted(h.disposition for h in handles) == ["inserted"] + ["merged"] * (n - 1)
        assert {h.id for h in handles} == {job.id}
        assert outcomes(job.id).count("merged") == n - 1


@pytest.mark.django_db(transaction=True)
@row_locking
def test_two_bulk_enqueues_of_the_same_keys_in_opposite_orders_do_not_deadlock(
    merge_mode: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two enqueue_many batches at once, [201, 202] and [202, 201], each merging into a
    pending job of both keys. merge() is slowed so that each batch holds its first key
    while it wants its second: taken one by one, the two would wait for each other in a
    circle (a deadlock error in one of them). The keys' locks are taken up front in one
    order, so both batches go through and every item is merged once."""
    merge_mode("union")
    original_merge = Sync.merge

    def slow_merge(self: Sync, existing: Any) -> Any:
        time.sleep(0.5)
        return original_merge(self, existing)

    seeds = {account: Sync(account, items=["seed"]).enqueue() for account in (201, 202)}
    monkeypatch.setattr(Sync, "merge", slow_merge)
    barrier = threading.Barrier(2)

    def batch(order: tuple[int, int], tag: str) -> list[Any]:
        connections["default"].ensure_connection()
        barrier.wait(timeout=30)
        return Sync.enqueue_many([Sync(a, items=[tag]) for a in order])

    futures = [
        in_thread(partial(batch, (201, 202), "x")),
        in_thread(partial(batch, (202, 201), "y")),
    ]
    handles = [h for f in futures for h in f.result(timeout=120)]

    assert {h.disposition for h in handles} == {"merged"}
    for account, seed in seeds.items():
        job = Job.objects.get(kind=Sync.kind, dedup_key=str(account))
        assert job.id == seed.id
        assert sorted(job.payload["items"]) == ["seed", "x", "y"]
        assert outcomes(job.id).count("merged") == 2


# --- merge locks are pruned --------------------------------------------------------------


@sqlite_too
def test_pruning_deletes_the_merge_locks_and_merges_go_on_as_before(
    merge_mode: Callable[[str], None],
) -> None:
    from django_jobqueue.models import MergeLock

    merge_mode("union")
    first = Sync(7, items=["a"]).enqueue()
    Sync(8, items=["a"]).enqueue()
    assert MergeLock.objects.count() == 2  # one per key ever merged, until pruned

    assert store.prune_merge_locks(batch_size=1) == 2  # batches until none is left
    assert MergeLock.objects.count() == 0

    again = Sync(7, items=["b"]).enqueue()  # its lock is made again; the merge holds
    assert (again.id, again.disposition) == (first.id, "merged")
    assert Job.objects.get(id=first.id).payload["items"] == ["a", "b"]


@pytest.mark.django_db(transaction=True)
@row_locking
def test_pruning_skips_a_merge_lock_an_enqueue_holds(merge_mode: Callable[[str], None]) -> None:
    from django_jobqueue.models import MergeLock

    merge_mode("union")
    Sync(7, items=["a"]).enqueue()
    Sync(8, items=["a"]).enqueue()
    holding, release = threading.Event(), threading.Event()

    def enqueue_and_hold() -> Any:
        with transaction.atomic():
            handle = Sync(7, items=["b"]).enqueue()  # takes key 7's lock row
            holding.set()
            assert release.wait(timeout=30)
        return handle

    held = in_thread(enqueue_and_hold)
    try:
        assert holding.wait(timeout=30)
        assert store.prune_merge_locks() == 1  # key 8's; key 7's is held, skipped
    finally:
        release.set()
    assert held.result(timeout=30).disposition == "merged"
    assert MergeLock.objects.count() == 1
    assert store.prune_merge_locks() == 1
    assert MergeLock.objects.count() == 0
