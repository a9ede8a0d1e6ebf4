"""The run tally: every path that deletes journal entries (cleanup, delete_finished, the
admin's delete action and delete view) adds the runs it deletes to RunTally in the same
transaction, so the run counters and the duration histogram never fall; two cleanups at
once count each deleted entry exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections, transaction
from django.test import Client
from django.utils import timezone

from django_jobqueue import Status, cleanup, store
from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job, JournalEntry, RunTally
from django_jobqueue.store import DURATION_BUCKETS, RunTotal, run_totals
from tests.helpers import postgres_only, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
sqlite_too = pytest.mark.sqlite

NOW = timezone.now()
OLD = NOW - timedelta(days=10)
CUT = NOW - timedelta(days=7)
FINAL = {Status.COMPLETED: "completed", Status.DEAD: "dead", Status.CANCELLED: "cancelled"}
# Durations on and beside the histogram's bounds (5 ms, 2.5 s, 1 h), and none at all.
DURATIONS = [
    timedelta(microseconds=1),
    timedelta(milliseconds=5),
    timedelta(microseconds=5001),
    timedelta(seconds=2.5),
    timedelta(seconds=61, microseconds=7),
    timedelta(hours=1),
    timedelta(hours=1, microseconds=1),
    None,
]


def make_jobs(count: int, *, kinds: tuple[str, ...] = ("shop.a", "shop.b")) -> list[Job]:
    """``count`` finished old jobs over ``kinds`` and the three terminal statuses, each with
    a journal of runs (retried, paused, released, stale-recovered, its final outcome, with
    durations around the buckets' bounds) and of entries that are no runs (merged, an
    operator's requeue, an operator's cancel of a pending job)."""
    statuses = list(FINAL)
    jobs = [
        Job(
            id=uuid7(),
            kind=kinds[i % len(kinds)],
            status=statuses[i % len(statuses)],
            created_at=OLD,
            visible_at=OLD,
            finished_at=OLD + timedelta(seconds=i),
            payload={"i": i},
        )
        for i in range(count)
    ]
    Job.objects.bulk_create(jobs)
    entries: list[JournalEntry] = []
    for i, job in enumerate(jobs):
        outcomes = ["merged", "retried", "paused", "requeued", "released", "stale-recovered"]
        for n, outcome in enumerate([*outcomes, FINAL[job.status]]):
            timed = outcome not in ("merged", "requeued", "released", "stale-recovered")
            entries.append(
                JournalEntry(
                    job_id=job.id,
                    kind=job.kind,
                    run_no=n,
                    outcome=outcome,
                    duration=DURATIONS[(i + n) % len(DURATIONS)] if timed else None,
                    worker="" if outcome in ("merged", "requeued") else "w:1",
                )
            )
        if job.status == Status.CANCELLED and i % 2:
            # Cancelled while pending, by an operator: journalled, but no run.
            entries[-1].worker = ""
            entries[-1].duration = None
    JournalEntry.objects.bulk_create(entries)
    return jobs


def keyed(totals: list[RunTotal]) -> dict[tuple[str, str], RunTotal]:
    return {(t.kind, t.outcome): t for t in totals}


def deleted_runs() -> int:
    return sum(RunTally.objects.values_list("runs", flat=True))


@sqlite_too
def test_a_cleanup_leaves_the_run_counters_and_the_histogram_as_they_were() -> None:
    jobs = make_jobs(12)
    kept = make_jobs(3, kinds=("shop.c",))
    Job.objects.filter(id__in=[j.id for j in kept]).update(finished_at=NOW)
    before = run_totals()
    # Every kind and every run outcome is there, with durations in several buckets.
    assert {t.outcome for t in before} == {
        "retried",
        "paused",
        "released",
        "stale-recovered",
        "completed",
        "dead",
        "cancelled",
    }
    assert len({t.buckets for t in before}) > 3
    runs_deleted = (
        JournalEntry.objects.filter(job__in=jobs)
        .exclude(outcome__in=["merged", "requeued"])
        .exclude(outcome="cancelled", worker="")
        .count()
    )

    # Batches of 5: later batches add to tally rows that earlier ones created.
    assert store.cleanup(finished_before=CUT, batch_size=5) == len(jobs)

    assert not JournalEntry.objects.filter(job_id__in=[j.id for j in jobs]).exists()
    assert JournalEntry.objects.filter(job_id__in=[j.id for j in kept]).count() == 3 * 7
    assert run_totals() == before
    assert deleted_runs() == runs_deleted
    # No run is tallied for what is no run: merges, requeues, an operator's cancel.
    assert set(RunTally.objects.values_list("outcome", flat=True)) <= {t.outcome for t in before}

    # A second cleanup adds to the tally: the kept jobs' runs move there too.
    Job.objects.filter(id__in=[j.id for j in kept]).update(finished_at=OLD)
    assert cleanup(finished_before=CUT) == len(kept)
    assert not JournalEntry.objects.exists()
    assert run_totals() == before


@sqlite_too
def test_the_histogram_of_deleted_runs_is_exact() -> None:
    """One kind's completed runs at known durations: after the cleanup the count, the sum
    (to the microsecond) and each cumulative bucket are what the durations say."""
    durations = [d for d in DURATIONS if d is not None]
    job = Job.objects.create(
        kind="shop.timed", status=Status.COMPLETED, finished_at=OLD, created_at=OLD
    )
    JournalEntry.objects.bulk_create(
        JournalEntry(job=job, kind=job.kind, outcome="completed", duration=d, worker="w:1")
        for d in [*durations, None]
    )
    cleanup(finished_before=CUT)

    [total] = [t for t in run_totals() if t.kind == "shop.timed"]
    assert (total.outcome, total.runs, total.timed) == ("completed", len(durations) + 1, 7)
    micros = sum(d // timedelta(microseconds=1) for d in durations)
    assert total.seconds == micros / 1_000_000
    expected = tuple(
        sum(1 for d in durations if d <= timedelta(seconds=bound)) for bound in DURATION_BUCKETS
    )
    assert total.buckets == expected
    assert expected[0] == 2  # 1 µs and exactly 5 ms: a bound is inclusive
    assert expected[-1] == 6  # all but 1 h + 1 µs


@sqlite_too
def test_a_cleanup_that_rolls_back_tallies_nothing() -> None:
    make_jobs(6)
    before = run_totals()

    def clean_then_fail() -> None:
        with transaction.atomic():
            assert store.cleanup(finished_before=CUT, batch_size=4) == 6
            assert deleted_runs() > 0
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        clean_then_fail()
    assert not RunTally.objects.exists()
    assert Job.objects.count() == 6
    assert run_totals() == before


@sqlite_too
def test_delete_finished_tallies_only_the_jobs_it_deletes() -> None:
    jobs = make_jobs(6)
    pending = Job.objects.create(kind="shop.a", status=Status.PENDING)
    JournalEntry.objects.create(job=pending, kind="shop.a", outcome="retried", worker="w:1")
    before = run_totals()

    deleted = store.delete_finished(job_ids=[jobs[0].id, jobs[1].id, pending.id], batch_size=2)

    assert set(deleted) == {jobs[0].id, jobs[1].id}
    assert run_totals() == before
    assert JournalEntry.objects.filter(job=pending).count() == 1  # an active job's journal stays
    assert deleted_runs() == 2 * 5  # per job: retried, paused, released, stale-recovered, final


@sqlite_too
def test_the_admin_delete_action_and_delete_view_keep_the_counters() -> None:
    jobs = make_jobs(6)
    admin = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(admin)
    changelist = "/admin/django_jobqueue/job/"
    before = run_totals()

    action = {"action": "delete_selected", "_selected_action": [str(j.id) for j in jobs[:4]]}
    assert client.post(changelist, {**action, "post": "yes"}).status_code == 302
    assert client.post(f"{changelist}{jobs[4].id}/delete/", {"post": "yes"}).status_code == 302

    assert set(Job.objects.values_list("id", flat=True)) == {jobs[5].id}
    assert run_totals() == before
    assert deleted_runs() == 5 * 5


def run_threads(*targets: Callable[[], Any]) -> list[Any]:
    """Runs each target on its own thread and connection; their results, or raises the
    first error."""
    results: list[Any] = [None] * len(targets)
    errors: list[BaseException] = []

    def run(index: int, target: Callable[[], Any]) -> None:
        try:
            results[index] = target()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=run, args=(i, t), name=f"cleanup-{i}")
        for i, t in enumerate(targets)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    return results


@sqlite_too
def test_two_cleanups_at_once_count_each_deleted_entry_exactly_once() -> None:
    """Two threads clean up the same old jobs in small batches at once: on PostgreSQL
    each batch skips the other's locked jobs and both upsert the same tally rows (the
    test below makes one wait for the other for certain); SQLite runs one batch at a
    time, whichever thread's."""
    jobs = make_jobs(300)
    before = run_totals()
    start = threading.Barrier(2)

    def clean() -> int:
        start.wait(10)
        return store.cleanup(finished_before=CUT, batch_size=7)

    counts = run_threads(clean, clean)

    assert sum(counts) == len(jobs)
    assert not Job.objects.exists()
    assert not JournalEntry.objects.exists()
    assert run_totals() == before


def backend_waits_on_a_lock(pid: int) -> bool:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", [pid])
        row = cursor.fetchone()
    return bool(row and row[0])


@postgres_only
def test_a_cleanup_waits_for_another_that_tallies_the_same_new_row_then_adds_to_it() -> None:
    """Cleanup A (completed jobs) and cleanup B (dead jobs) both delete `retried` runs of
    one kind, whose tally row does not exist yet. A has inserted it and not committed: B's
    upsert waits for A (no duplicate row, no unique violation), then adds to A's row."""
    make_jobs(6, kinds=("shop.a",))
    before = run_totals()
    a_tallied = threading.Event()
    a_commit = threading.Event()
    b_pid: list[int] = []

    def cleanup_a() -> int:
        with transaction.atomic():
            deleted = cleanup(finished_before=CUT, status="completed")
            a_tallied.set()
            assert a_commit.wait(20)
        return deleted

    def cleanup_b() -> int:
        assert a_tallied.wait(20)
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            b_pid.append(cursor.fetchone()[0])
        return cleanup(finished_before=CUT, status="dead")

    def referee() -> None:
        try:
            wait_for(lambda: bool(b_pid) and backend_waits_on_a_lock(b_pid[0]), timeout=20)
        finally:
            a_commit.set()

    counts = run_threads(cleanup_a, cleanup_b, referee)

    assert counts[:2] == [2, 2]
    assert RunTally.objects.get(kind="shop.a", outcome="retried").runs == 4
    assert run_totals() == before
