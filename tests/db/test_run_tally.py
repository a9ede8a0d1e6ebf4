"""The run tally: every settlement adds its runs to RunTally in its own guarded write, so
the metrics' counters and histogram are read from a few tally rows, never from the
journal (issue 17, finding 6): a scrape costs the same however long the journal grows.
Deleting journal entries (cleanup, the admin's delete) leaves the counters as they were;
a settlement that rolls back or whose guard fails counts nothing."""

from __future__ import annotations

import threading
import zlib
from concurrent.futures import Future
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.db import connection, connections, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobqueue import Status, cleanup, conf, store
from django_jobqueue.metrics import exposition
from django_jobqueue.models import Job, JournalEntry, RunTally
from django_jobqueue.rules.lifecycle import Run, completed, failure
from django_jobqueue.store import DURATION_BUCKETS, RunTotal, run_totals
from django_jobqueue.store.monitoring import TALLY_SHARDS
from tests.helpers import row_locking, run_burst
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKER = "w:1"
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


def keyed(totals: list[RunTotal]) -> dict[tuple[str, str], RunTotal]:
    return {(t.kind, t.outcome): t for t in totals}


def runs_of(kind: str) -> dict[str, int]:
    return {t.outcome: t.runs for t in run_totals() if t.kind == kind}


def claim(count: int, kind: str = tasks.add.kind) -> list[store.Claimed]:
    tasks.add.enqueue_many([{"a": n, "b": n} for n in range(count)])
    claimed = store.claim_jobs(
        worker_id=WORKER, request=store.ClaimRequest(limit=count, kinds=[kind])
    )
    assert len(claimed) == count
    return claimed


def ran(c: store.Claimed, duration: timedelta | None) -> Run:
    started = timezone.now() - (duration or timedelta(0))
    return Run(
        job_id=c.id,
        kind=c.kind,
        run_no=c.run_count,
        worker=WORKER,
        started_at=started,
        duration=duration,
    )


def journal_queries(queries: list[dict[str, str]]) -> list[str]:
    table = JournalEntry._meta.db_table
    return [q["sql"] for q in queries if table in q["sql"]]


@pytest.mark.django_db(transaction=True)
def test_a_scrape_reads_no_journal_and_counts_runs_by_outcome_through_a_cleanup() -> None:
    """Real worker runs end completed, retried, dead and paused; a scrape reads the
    tally (no query names the journal table) and counts each outcome; after a cleanup
    has deleted every finished job and its journal, the numbers are as they were."""
    tasks.add.enqueue_many([{"a": n, "b": n} for n in range(5)])
    tasks.always_fails.enqueue_many([{}] * 2)  # max_failures=3: retried, retried, dead
    tasks.permanent.enqueue(reason="bad")
    tasks.pause_later.enqueue(seconds=3600)  # paused once, pending an hour on
    run_burst(concurrency=2)
    expected = {
        tasks.add.kind: {"completed": 5},
        tasks.always_fails.kind: {"retried": 4, "dead": 2},
        tasks.permanent.kind: {"dead": 1},
        tasks.pause_later.kind: {"paused": 1},
    }
    assert {kind: runs_of(kind) for kind in expected} == expected

    for _ in range(2):
        with CaptureQueriesContext(connection) as scrape:
            body, _ = exposition()
        assert journal_queries(scrape.captured_queries) == []
        text = body.decode()
        assert f'jobqueue_runs_total{{kind="{tasks.add.kind}",outcome="completed"}} 5.0' in text
        assert (
            f'jobqueue_runs_total{{kind="{tasks.always_fails.kind}",outcome="retried"}} 4.0' in text
        )
        assert f'jobqueue_run_duration_seconds_count{{kind="{tasks.add.kind}"}} 5.0' in text
        if JournalEntry.objects.filter(kind=tasks.add.kind).exists():
            # Between the two scrapes a cleanup deletes every finished job's journal.
            assert cleanup(finished_before=timezone.now() + timedelta(seconds=1)) == 8
            assert set(JournalEntry.objects.values_list("kind", flat=True)) == {
                tasks.pause_later.kind
            }
    assert {kind: runs_of(kind) for kind in expected} == expected


def test_the_histogram_of_settled_runs_is_exact() -> None:
    """One batch of completed runs at known durations (several in one tally row): the
    count, the sum to the microsecond and each cumulative bucket are what they say."""
    claimed = claim(len(DURATIONS))
    settlements = [completed(ran(c, d), result=0) for c, d in zip(claimed, DURATIONS, strict=True)]
    assert store.settle(worker_id=WORKER, settlements=settlements) == [True] * len(DURATIONS)

    [total] = [t for t in run_totals() if t.kind == tasks.add.kind]
    timed = [d for d in DURATIONS if d is not None]
    assert (total.outcome, total.runs, total.timed) == ("completed", len(DURATIONS), len(timed))
    assert total.seconds == sum(d // timedelta(microseconds=1) for d in timed) / 1_000_000
    expected = tuple(
        sum(1 for d in timed if d <= timedelta(seconds=bound)) for bound in DURATION_BUCKETS
    )
    assert total.buckets == expected
    assert expected[0] == 2  # 1 µs and exactly 5 ms: a bound is inclusive
    assert expected[-1] == 6  # all but 1 h + 1 µs


def test_a_settlement_that_rolls_back_or_lost_its_claim_counts_nothing() -> None:
    first, second = claim(2)

    def settle_then_fail() -> None:
        with transaction.atomic():
            assert store.settle(
                worker_id=WORKER, settlements=[completed(ran(first, None), result=0)]
            )
            assert runs_of(tasks.add.kind) == {"completed": 1}
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError, match="roll back"):
        settle_then_fail()
    assert runs_of(tasks.add.kind) == {}

    # Another worker's claim: the guard fails, nothing is written, nothing counted.
    stranger = completed(ran(second, None), result=0)
    assert store.settle(worker_id="w:other", settlements=[stranger]) == [False]
    assert runs_of(tasks.add.kind) == {}
    assert store.settle(worker_id=WORKER, settlements=[completed(ran(second, None), result=0)]) == [
        True
    ]
    assert runs_of(tasks.add.kind) == {"completed": 1}


def test_a_run_an_operator_cancelled_is_counted_as_cancelled() -> None:
    """The ending the statement picks (the cancel instead of the run's own retry) is the
    one counted, as it is the one journalled."""
    [c] = claim(1)
    store.cancel(job_id=c.id, actor="ops")
    retry = failure(
        ran(c, timedelta(seconds=1)),
        failure_count=0,
        policy=conf.get().policy(),
        now=timezone.now(),
        note="boom",
    )
    assert store.settle(worker_id=WORKER, settlements=[retry]) == [True]
    assert Job.objects.get(id=c.id).status == Status.CANCELLED
    assert runs_of(tasks.add.kind) == {"cancelled": 1}


def test_stale_recovery_is_counted_and_the_admin_delete_keeps_the_counters() -> None:
    claimed = claim(3)
    later = timezone.now() + timedelta(hours=1)
    assert store.recover_expired(now=later) == 3
    again = store.claim_jobs(
        worker_id=WORKER, request=store.ClaimRequest(limit=3, kinds=[tasks.add.kind], now=later)
    )
    store.settle(worker_id=WORKER, settlements=[completed(ran(c, None), result=0) for c in again])
    before = run_totals()
    assert {t.outcome: t.runs for t in before} == {"stale-recovered": 3, "completed": 3}

    admin = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(admin)
    changelist = "/admin/django_jobqueue/job/"
    action = {"action": "delete_selected", "_selected_action": [str(c.id) for c in claimed[:2]]}
    assert client.post(changelist, {**action, "post": "yes"}).status_code == 302
    assert client.post(f"{changelist}{claimed[2].id}/delete/", {"post": "yes"}).status_code == 302

    assert not Job.objects.exists()
    assert not JournalEntry.objects.exists()
    assert run_totals() == before


def test_the_migration_counts_the_runs_the_journal_held_before_it() -> None:
    """Upgrading: the tally held only the deleted runs; the migration adds the journal's
    runs (not an operator's cancel of a pending job, nor merges and requeues)."""
    migration = __import__(
        "django_jobqueue.migrations.0010_run_tally_counts_every_run", fromlist=["x"]
    )
    job = Job.objects.create(kind="shop.old", status=Status.COMPLETED)
    JournalEntry.objects.bulk_create(
        [
            JournalEntry(job=job, kind="shop.old", outcome="retried", worker=WORKER),
            JournalEntry(
                job=job,
                kind="shop.old",
                outcome="completed",
                worker=WORKER,
                duration=timedelta(milliseconds=7),
            ),
            JournalEntry(job=job, kind="shop.old", outcome="merged"),
            JournalEntry(job=job, kind="shop.old", outcome="cancelled"),  # no worker: no run
        ]
    )
    RunTally.objects.create(kind="shop.old", outcome="retried", runs=5)  # deleted earlier

    migration.tally_the_journal(apps, type("Editor", (), {"connection": connection})())

    totals = keyed([t for t in run_totals() if t.kind == "shop.old"])
    assert {k: t.runs for k, t in totals.items()} == {
        ("shop.old", "retried"): 6,
        ("shop.old", "completed"): 1,
    }
    done = totals[("shop.old", "completed")]
    assert (done.timed, done.seconds, done.buckets[0], done.buckets[1]) == (1, 0.007, 0, 1)


def named_thread(name: str, fn: Any) -> Future[Any]:
    """Run ``fn`` on a thread called ``name`` (its own connection, closed after)."""
    future: Future[Any] = Future()

    def run() -> None:
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)
        finally:
            connections.close_all()

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def colliding_names() -> tuple[str, str]:
    """Two thread names whose settlements by WORKER would hash to one tally row if the
    shard were chosen by worker and thread alone."""

    def h(name: str) -> int:
        return zlib.crc32(f"{WORKER}/{name}".encode()) % TALLY_SHARDS

    loop = "jobqueue-loop"
    slot = next(f"jobqueue-slot-{i}" for i in range(10_000) if h(f"jobqueue-slot-{i}") == h(loop))
    return loop, slot


@pytest.mark.django_db(transaction=True)
@row_locking
def test_the_loops_turn_never_waits_on_the_tally_row_an_atomic_tasks_transaction_holds() -> None:
    """An atomic task's settlement holds its tally row until its transaction commits (a
    task may go on working after ``settle_now``). The worker loop's turn settling the
    same kind and outcome at that moment, from a thread whose name hashes alike, goes
    through at once: settlements in a caller's transaction take other shards."""
    held, loose, first = claim(3)
    loop_name, slot_name = colliding_names()
    settled, release = threading.Event(), threading.Event()
    # The loop has settled a run of the kind before, so its tally row exists (on MySQL,
    # inserting a new row can wait on InnoDB's gap lock beside a row another open
    # transaction inserted; an upsert of an existing row locks only that row).
    named_thread(
        loop_name,
        lambda: store.exchange(
            worker_id=WORKER, settlements=[completed(ran(first, None), result=0)], request=None
        ),
    ).result(timeout=10)

    def atomic_task() -> None:
        with transaction.atomic():
            assert store.settle(
                worker_id=WORKER, settlements=[completed(ran(held, None), result=1)]
            )
            settled.set()
            assert release.wait(30)

    task = named_thread(slot_name, atomic_task)
    try:
        assert settled.wait(10)
        turn = named_thread(
            loop_name,
            lambda: store.exchange(
                worker_id=WORKER, settlements=[completed(ran(loose, None), result=2)], request=None
            ),
        )
        applied, _ = turn.result(timeout=5)  # waited on the task's row lock: a timeout
        assert applied == [True]
    finally:
        release.set()
    task.result(timeout=10)
    assert runs_of(tasks.add.kind) == {"completed": 3}
