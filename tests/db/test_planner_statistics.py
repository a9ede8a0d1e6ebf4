"""The jobs table kept fit for the claim by the workers (``StatisticsKeeper``): its
planner statistics (``store.upkeep_due``, ``store.gather_statistics``): after a bulk
load the claim is planned on the table as it is (by the claim index, no sort of every
pending row), not as the last ANALYZE saw it; fresh statistics are left alone; one
session gathers at a time. And its dead row versions (``store.vacuum_jobs``): once a
drain's pile up, a vacuum takes their entries out of the claim index, which a claim
would otherwise walk past, all of them, every turn. Elsewhere than PostgreSQL nothing
is asked of the database."""

from __future__ import annotations

import json
import math
import uuid
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.models import Job
from django_jobqueue.store import ClaimRequest, tables
from django_jobqueue.store.tables import STATISTICS_LOCK
from django_jobqueue.worker.loop import Worker
from django_jobqueue.worker.services.base import Timings
from django_jobqueue.worker.services.statistics import StatisticsKeeper
from tests.helpers import is_postgres, postgres_only, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

JOB_TABLE = Job._meta.db_table
LOADED = 5_000
BIG = 100_000
DRAINED = 20_000  # past VACUUM_ROWS (10,000) plus its share of the table


def flushed() -> None:
    """This session's counters flushed for the statistics views, read by a new one."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    connection.close()


def loaded(n: int = 5_000) -> None:
    """``n`` jobs bulk-loaded into a table the planner has no statistics of (as after a
    TRUNCATE, or a table created by the migrations), their counters flushed for the
    statistics views (a backend reports them at most once a second otherwise)."""
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {JOB_TABLE} CASCADE")
        # And no column statistics of earlier tests' rows (TRUNCATE keeps them): the
        # table as the migrations leave it (the tests connect as a superuser).
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = %s::regclass", [JOB_TABLE])
    tasks.noop.enqueue_many([{} for _ in range(n)])
    flushed()  # a new session: the flush is done, the snapshot is fresh


def stale() -> bool:
    return store.upkeep_due().analyze


def vacuum_due() -> bool:
    return store.upkeep_due().vacuum


def claim_plan() -> str:
    statement, params = store.claim_statement(
        worker_id="host:1", request=ClaimRequest(kinds=[tasks.noop.kind], limit=16)
    ) or ("", [])
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {statement}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


@postgres_only
def test_a_bulk_load_makes_the_statistics_stale_and_one_refresh_gathers_them() -> None:
    loaded()
    wait_for(stale, timeout=30)
    keeper = keeper_of()
    keeper.run()
    assert not stale()
    gathered = analyzes()
    keeper.run()
    assert analyzes() == gathered  # fresh: nothing gathered again
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT last_analyze IS NOT NULL, n_live_tup FROM pg_stat_user_tables"
            " WHERE relname = %s",
            [JOB_TABLE],
        )
        analyzed, live = cursor.fetchone()
    assert analyzed
    assert live == LOADED


@postgres_only
def test_after_a_large_load_the_claim_reads_every_pending_row_until_the_refresh() -> None:
    # 100,000 rows: below some tens of thousands the planner's guess from the table's
    # size alone still picks the claim index.
    loaded(BIG)
    before = claim_plan()
    assert "Sort" in before, before  # every pending row read, then sorted for 16
    wait_for(stale, timeout=30)
    assert store.gather_statistics() is True
    after = claim_plan()
    assert "jobqueue_job_claim" in after, after
    assert "Sort" not in after, after  # the index read in order, 16 rows and done


@postgres_only
def test_rows_changed_in_place_gather_them_at_autovacuums_pace_and_growth_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A drain's claims and settlements change every row without growing the table: the
    statistics just gathered are left alone until ``STATISTICS_CHANGED_EVERY`` has
    passed (the claim is planned by the claim index meanwhile, rows made pending in
    place or not); a load past the threshold is due at the next look."""
    loaded()
    wait_for(stale, timeout=30)
    assert store.gather_statistics() is True
    Job.objects.update(status="waiting")
    flushed()
    Job.objects.update(status="pending")  # 10,000 changed: past 1,000 + 500 twice over
    flushed()
    assert not stale()
    assert "jobqueue_job_claim" in claim_plan()
    assert "Sort" not in claim_plan()
    monkeypatch.setattr(tables, "STATISTICS_CHANGED_EVERY", timedelta(0))
    wait_for(stale, timeout=30)
    assert store.gather_statistics() is True
    monkeypatch.undo()
    tasks.noop.enqueue_many([{} for _ in range(1_000)])  # 1,000 more: not yet
    flushed()
    assert not stale()
    tasks.noop.enqueue_many([{} for _ in range(1_000)])  # past 1,000 + 500
    flushed()
    wait_for(stale, timeout=30)


@postgres_only
def test_a_second_session_holding_the_lock_is_left_to_gather_them() -> None:
    loaded()
    wait_for(stale, timeout=30)
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", list(STATISTICS_LOCK))
        assert store.gather_statistics() is False  # another gathers them
        assert stale()
    finally:
        other.rollback()
        other.close()
    assert store.gather_statistics() is True


def drained(n: int) -> None:
    """``n`` jobs loaded, then finished (one dead version each), their counters flushed."""
    loaded(n)
    Job.objects.update(status="completed", finished_at=timezone.now())
    flushed()


def claim_pages() -> int:
    """Pages a claim of an empty queue reads (after a first claim has marked the dead
    entries it met as such, as every later claim finds them)."""
    statement, params = store.claim_statement(
        worker_id="host:1", request=ClaimRequest(kinds=[tasks.noop.kind], limit=16)
    ) or ("", [])
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement}", params)
        (plan,) = cursor.fetchone()
    top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


@postgres_only
def test_a_drains_dead_rows_are_vacuumed_out_of_the_claim_index() -> None:
    drained(DRAINED)
    wait_for(vacuum_due, timeout=30)
    walked = claim_pages()
    assert store.vacuum_jobs() is True
    flushed()
    wait_for(lambda: not vacuum_due(), timeout=30)
    # 20,000 dead entries are some hundred pages; without them, a handful.
    assert claim_pages() * 10 < walked, walked


@postgres_only
def test_a_finished_history_raises_the_vacuums_threshold_only_up_to_its_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The share of the table's rows counts them up to ``VACUUM_SHARE_OF``: the dead
    entries a claim walks past come from the drain, not from the history kept beside
    it. Scaled down: 5,000 rows and 250 dead, due with the share of 1,000 rows
    (100 + 50), not with the share of all 5,000 (100 + 250)."""
    history_with_dead_rows(monkeypatch)
    monkeypatch.setattr(tables, "VACUUM_SHARE_OF", math.inf)
    assert not store.upkeep_due().vacuum
    monkeypatch.setattr(tables, "VACUUM_SHARE_OF", 1_000)
    assert store.upkeep_due().vacuum


@postgres_only
def test_the_keeper_vacuums_on_a_thread_of_its_own_once_dead_rows_pile_up() -> None:
    loaded(LOADED)  # a few dead rows: not yet
    keeper = keeper_of()
    before = vacuums()
    keeper.run()
    assert not keeper.vacuuming()
    assert vacuums() == before
    drained(DRAINED)
    wait_for(vacuum_due, timeout=30)
    keeper.run()
    wait_for(lambda: not keeper.vacuuming(), timeout=60)
    wait_for(lambda: vacuums() == before + 1, timeout=30)


def keeper_of(
    running: dict[uuid.UUID, Any] | None = None, *, caught_up: bool | None = True
) -> StatisticsKeeper:
    """A keeper calling the database directly, seeing ``running`` as its worker's runs
    (none: an idle worker) and ``caught_up`` as what its last claim found."""
    return StatisticsKeeper(
        lambda call: call(),
        interval=Timings().statistics,
        running={} if running is None else running,
        caught_up=lambda: caught_up,
    )


def history_with_dead_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scaled down: 5,000 rows, 250 of them dead, and 100 dead rows as the base."""
    monkeypatch.setattr(tables, "VACUUM_ROWS", 100)
    loaded(LOADED)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {JOB_TABLE}")  # the table's rows known, none dead
    ids = list(Job.objects.values_list("id", flat=True)[:250])
    Job.objects.filter(id__in=ids).update(status="completed", finished_at=timezone.now())
    flushed()


@postgres_only
def test_with_no_run_going_the_vacuum_comes_sooner(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker whose queue keeps up (no run going) vacuums at the idle share of every
    row: 100 + 0.002 x 5,000 = 110 < 250 dead; a busy one at 100 + 0.05 x 5,000."""
    history_with_dead_rows(monkeypatch)
    assert not store.upkeep_due().vacuum
    assert store.upkeep_due(idle=True).vacuum
    # A run still going in the worker, a claim that filled its room, or no claim yet (a
    # worker just started on a backlog): the busy threshold, no vacuum yet.
    before = vacuums()
    for busy in (
        keeper_of({uuid.uuid4(): SimpleNamespace(ended=False)}),
        keeper_of(caught_up=False),
        keeper_of(caught_up=None),
    ):
        busy.run()
        assert not busy.vacuuming()
    assert vacuums() == before
    # Its run ended (waiting for its settlement): idle, and the vacuum starts.
    idle = keeper_of({uuid.uuid4(): SimpleNamespace(ended=True)})
    idle.run()
    wait_for(lambda: not idle.vacuuming(), timeout=60)
    wait_for(lambda: vacuums() == before + 1, timeout=30)


def test_the_idle_threshold_is_never_above_the_busy_one() -> None:
    for rows in (0, 10**4, 10**6, 10**7, 10**8, 10**9):
        idle = tables.VACUUM_IDLE_SHARE * min(rows, tables.VACUUM_IDLE_SHARE_OF)
        busy = tables.VACUUM_SHARE * min(rows, tables.VACUUM_SHARE_OF)
        assert idle <= busy + 1e-6, rows
    assert tables.VACUUM_IDLE_SHARE * 10**7 < tables.VACUUM_SHARE * tables.VACUUM_SHARE_OF


def vacuums() -> int:
    return table_count("vacuum_count")


def analyzes() -> int:
    return table_count("analyze_count")


def table_count(column: str) -> int:
    """One of the jobs table's counters in ``pg_stat_user_tables``, read afresh."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(f"SELECT {column} FROM pg_stat_user_tables WHERE relname = %s", [JOB_TABLE])
        return int(cursor.fetchone()[0])


@postgres_only
def test_no_vacuum_inside_a_transaction() -> None:
    with transaction.atomic():
        assert store.vacuum_jobs() is False


def test_the_worker_keeps_them_and_elsewhere_nothing_is_asked_of_the_database() -> None:
    assert "statistics" in [s.name for s in Worker()._maintenance.services]
    keeper = keeper_of()
    if is_postgres():
        loaded()
        wait_for(stale, timeout=30)
        keeper.run()
        assert not stale()
        return
    tasks.noop.enqueue_many([{} for _ in range(2000)])
    Job.objects.update(status="completed")
    with CaptureQueriesContext(connection) as queries:
        keeper.run()
        assert store.vacuum_jobs() is False
    assert not keeper.vacuuming()
    assert [q["sql"] for q in queries.captured_queries] == []


def test_the_keeper_never_wakes_an_idle_worker() -> None:
    keeper = keeper_of()
    assert keeper.wake_in(0.0) is None
    assert keeper.wake_in(3600.0) is None


def test_after_a_busy_spell_the_keeper_looks_once_more_when_idle() -> None:
    """Its last look found a run going: the worker, idle since, is woken once for a
    look at the idle threshold; after that look (no run going) it is left asleep."""
    running: dict[uuid.UUID, Any] = {uuid.uuid4(): SimpleNamespace(ended=False)}
    keeper = keeper_of(running)
    keeper.run()
    assert keeper.wake_in(0.5) == pytest.approx(keeper.interval - 0.5)
    running.clear()
    keeper.run()
    assert keeper.wake_in(0.5) is None
    # A worker that has not claimed yet is not woken for it (nor is it idle).
    fresh = keeper_of(caught_up=None)
    fresh.run()
    assert fresh.wake_in(0.5) is None
