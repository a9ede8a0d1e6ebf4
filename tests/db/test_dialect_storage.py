"""The storage half of the dialect conformance suite: the same tests of the one
interface (keyed and bulk inserts, rate tokens, journal deletion, percentiles, row
estimates, row locks, deadlock retries, JSON depth, wake-ups, the classification of
connection errors, the atomic run's transaction mode, the server's version) on each
database leg: PostgreSQL, SQLite and MariaDB/MySQL. A test says what every dialect
does; where the databases differ, what the dialect answers decides what is expected."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import DatabaseError, IntegrityError, connection, connections, transaction
from django.db.utils import DatabaseErrorWrapper
from django.utils import timezone

from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job, JournalEntry, Outcome, Priority, RateBucket, Status
from django_jobqueue.store.browse import count
from django_jobqueue.store.dialects import (
    MINIMUM_VERSIONS,
    Dialect,
    MySQL,
    PostgreSQL,
    SQLite,
    for_alias,
)
from django_jobqueue.store.dialects.base.storage import ROW_COLUMNS, NewRow
from django_jobqueue.store.inserting import IDEMPOTENCY
from django_jobqueue.store.wakeups import CHANNEL, supported
from tests.helpers import in_thread

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

KIND = "conformance.storage"


@pytest.fixture
def d() -> Dialect:
    return for_alias("default")


def new_row(**fields: object) -> NewRow:
    now = timezone.now()
    values: dict[str, object] = {
        "id": uuid7(),
        "kind": KIND,
        "queue": "default",
        "payload": '{"n": 1}',
        "priority": Priority.NORMAL,
        "created_at": now,
        "visible_at": now,
    }
    values.update(fields)
    return NewRow(**values)  # type: ignore[arg-type]


# --- inserts -------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 3], ids=["one", "many"])
def test_insert_jobs_writes_fresh_pending_rows(d: Dialect, rows: int) -> None:
    later = timezone.now() + timedelta(minutes=5)
    written = [
        new_row(payload=json.dumps({"n": n, "text": "é"}), visible_at=later, priority=n % 3)
        for n in range(rows)
    ]
    d.insert_jobs(written)
    found = {job.id: job for job in Job.objects.filter(kind=KIND)}
    assert set(found) == {r.id for r in written}
    for n, r in enumerate(written):
        job = found[r.id]
        assert job.payload == {"n": n, "text": "é"}
        assert (job.queue, job.priority, job.status) == ("default", n % 3, Status.PENDING)
        assert (job.created_at, job.visible_at) == (r.created_at, later)
        assert (job.run_count, job.failure_count, job.carry) == (0, 0, {})
        assert (job.claimed_by, job.cancel_requested, job.cancel_actor) == ("", False, "")
        assert (job.dedup_key, job.idempotency_key, job.finished_at) == (None, None, None)


def test_insert_jobs_keeps_a_rows_keys(d: Dialect) -> None:
    one, other = new_row(dedup_key="d-1"), new_row(idempotency_key="i-1")
    d.insert_jobs([one, other, new_row()])
    keys = dict(Job.objects.filter(kind=KIND).values_list("id", "dedup_key"))
    assert keys[one.id] == "d-1"
    assert Job.objects.get(id=other.id).idempotency_key == "i-1"


def test_insert_jobs_past_one_statements_parameters_writes_every_row(d: Dialect) -> None:
    many = d.max_params // len(ROW_COLUMNS) + 7
    d.insert_jobs([new_row(payload=json.dumps({"n": n})) for n in range(many)])
    assert Job.objects.filter(kind=KIND).count() == many
    assert sorted(p["n"] for p in Job.objects.filter(kind=KIND).values_list("payload", flat=True))[
        -1
    ] == (many - 1)


def test_insert_keyed_writes_one_active_job_per_key(d: Dialect) -> None:
    first = new_row(idempotency_key="order-7")
    assert d.insert_keyed(first, unique=IDEMPOTENCY) is True
    # A second job with the key is not written, and the caller's transaction goes on.
    assert d.insert_keyed(new_row(idempotency_key="order-7"), unique=IDEMPOTENCY) is False
    assert list(Job.objects.filter(kind=KIND).values_list("id", flat=True)) == [first.id]
    assert d.insert_keyed(new_row(idempotency_key="order-8"), unique=IDEMPOTENCY) is True
    # Once the holder is finished the key is free: the constraint holds active jobs only.
    Job.objects.filter(id=first.id).update(status=Status.COMPLETED, finished_at=timezone.now())
    again = new_row(idempotency_key="order-7")
    assert d.insert_keyed(again, unique=IDEMPOTENCY) is True
    assert Job.objects.filter(idempotency_key="order-7").count() == 2


def test_a_duplicate_id_is_the_statements_error_not_the_connections(d: Dialect) -> None:
    row = new_row()
    d.insert_jobs([row])
    with pytest.raises(IntegrityError) as raised, transaction.atomic():
        d.insert_jobs([row])
    assert d.is_connection_error(raised.value) is False


# --- rate tokens -----------------------------------------------------------------------


def test_take_tokens_takes_while_there_are_enough_and_writes_nothing_else(d: Dialect) -> None:
    refill = 0.001  # a token every 1000 s: none comes back during the test
    assert d.take_tokens(kind=KIND, capacity=2, refill=refill, count=1) is None
    assert d.take_tokens(kind=KIND, capacity=2, refill=refill, count=1) is None
    left = RateBucket.objects.get(kind=KIND).tokens
    assert left < 0.1
    wait = d.take_tokens(kind=KIND, capacity=2, refill=refill, count=1)
    assert wait is not None
    assert 900 < wait <= 1000
    assert RateBucket.objects.get(kind=KIND).tokens == left  # nothing taken
    # A new bucket starts full.
    assert d.take_tokens(kind=KIND + ".other", capacity=3, refill=refill, count=3) is None


# --- the journal ---------------------------------------------------------------------


def entry(job_id: uuid.UUID, seconds: float | None, kind: str = KIND) -> JournalEntry:
    return JournalEntry.objects.create(
        job_id=job_id,
        kind=kind,
        run_no=1,
        outcome=Outcome.RETRIED,
        duration=None if seconds is None else timedelta(seconds=seconds),
    )


def test_delete_journal_deletes_the_entries_of_those_jobs_only(d: Dialect) -> None:
    gone, kept = new_row(), new_row()
    d.insert_jobs([gone, kept])
    for seconds in (1, 2, None):
        entry(gone.id, seconds)
        entry(kept.id, seconds)
    d.delete_journal([])
    assert JournalEntry.objects.count() == 6
    d.delete_journal([gone.id])
    assert set(JournalEntry.objects.values_list("job_id", flat=True)) == {kept.id}
    assert JournalEntry.objects.count() == 3


def test_percentiles_interpolate_as_percentile_cont(d: Dialect) -> None:
    row = new_row()
    d.insert_jobs([row])
    for seconds in (5, 1, 4, 2, 3, None):
        entry(row.id, seconds)
    entry(row.id, 10, kind=KIND + ".once")
    found = d.percentiles(JournalEntry.objects.filter(duration__isnull=False))
    assert found.keys() == {KIND, KIND + ".once"}
    assert found[KIND] == (pytest.approx(3.0), pytest.approx(4.8))
    assert found[KIND + ".once"] == (pytest.approx(10.0), pytest.approx(10.0))
    assert d.percentiles(JournalEntry.objects.none()) == {}


def test_a_count_past_its_cap_is_the_planners_estimate_or_exact(d: Dialect) -> None:
    d.insert_jobs([new_row() for _ in range(5)])
    qs = Job.objects.filter(kind=KIND)
    assert count(qs, cap=10).value == 5
    planned = d.planned_rows(qs)
    counted = count(qs, cap=3)
    if planned is None:
        assert (counted.value, counted.estimated) == (5, False)
    else:
        assert planned >= 0
        assert counted.estimated
        assert counted.value >= 4


# --- row locks and deadlocks ---------------------------------------------------------


def test_locked_rows_are_the_querysets_rows(d: Dialect) -> None:
    row = new_row()
    d.insert_jobs([row])
    with transaction.atomic():
        for skip in (True, False):
            locked = d.locked(Job.objects.filter(id=row.id), skip_locked=skip)
            assert [j.id for j in locked] == [row.id]
            assert locked.query.select_for_update is connection.features.has_select_for_update


def deadlock_victim() -> DatabaseError:
    """A deadlock as this database's driver reports one (MySQL's server code 1213)."""
    driver = connection.Database
    with pytest.raises(DatabaseError) as raised, DatabaseErrorWrapper(connection):
        raise driver.OperationalError(1213, "Deadlock found when trying to get lock")
    return raised.value


@pytest.mark.django_db(transaction=True)
def test_a_deadlock_victim_is_run_again_only_where_the_dialect_retries(d: Dialect) -> None:
    victim = deadlock_victim()
    calls: list[int] = []

    def once_a_victim() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise victim
        return "done"

    retries = isinstance(d, MySQL)  # InnoDB picks victims; the others never need to
    if retries:
        assert d.retrying_deadlocks(once_a_victim) == "done"
        assert len(calls) == 2
    else:
        with pytest.raises(DatabaseError):
            d.retrying_deadlocks(once_a_victim)
        assert len(calls) == 1
    # Inside a caller's transaction only the caller can run it again, on every database.
    calls.clear()
    with pytest.raises(DatabaseError), transaction.atomic():
        d.retrying_deadlocks(once_a_victim)
    assert len(calls) == 1


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_the_json_depth_cap_is_what_the_columns_hold(d: Dialect) -> None:
    cap = d.json_depth_cap()
    levels = cap[0] if cap else 200
    d.insert_jobs([new_row(payload=nested(levels))])
    if cap is not None:
        with pytest.raises(DatabaseError), transaction.atomic():
            d.insert_jobs([new_row(payload=nested(levels + 1))])


# --- wake-ups ---------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_notify_wakes_a_listener_on_commit_where_the_database_listens(d: Dialect) -> None:
    assert supported("default") is d.listens()
    if not d.listens():
        with transaction.atomic():
            d.notify(CHANNEL, "default")  # a no-op: workers poll
        with pytest.raises(NotImplementedError):
            d.listen(CHANNEL)
        return
    listening = d.listen(CHANNEL)
    try:
        with transaction.atomic():
            d.notify(CHANNEL, "conformance")
            assert list(listening.payloads(timeout=0.2)) == []  # nothing before commit
        assert "conformance" in list(listening.payloads(timeout=2.0))
    finally:
        listening.close()


# --- connection errors -----------------------------------------------------------------


def _short_lock_wait(d: Dialect) -> str:
    """The session setting that makes this connection give up waiting for a lock soon."""
    if isinstance(d, PostgreSQL):
        return "SET lock_timeout = '200ms'"
    if isinstance(d, MySQL):
        return "SET SESSION innodb_lock_wait_timeout = 1"
    assert isinstance(d, SQLite)
    return "PRAGMA busy_timeout = 200"


@pytest.fixture
def locked_by_another_session(d: Dialect) -> Iterator[uuid.UUID]:
    """A job row that another session holds locked (the whole database, on SQLite)."""
    row = new_row()
    d.insert_jobs([row])
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic():
            # A write: the row's lock, and on SQLite the database's one write lock.
            Job.objects.filter(id=row.id).update(priority=Priority.HIGH)
            holding.set()
            release.wait(10)

    held = in_thread(hold)
    assert holding.wait(10)
    try:
        yield row.id
    finally:
        release.set()
        held.result(timeout=10)


@pytest.mark.django_db(transaction=True)
def test_a_lock_another_session_holds_past_the_wait_is_transient(
    d: Dialect, locked_by_another_session: uuid.UUID
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_short_lock_wait(d))
    try:
        with pytest.raises(DatabaseError) as raised:
            Job.objects.filter(id=locked_by_another_session).update(priority=Priority.LOW)
        assert d.is_connection_error(raised.value) is True
    finally:
        connection.close()  # the session setting goes with it


# --- the atomic run's transaction -----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_atomic_run_mode_begins_a_transaction_that_commits_and_restores_the_mode(
    d: Dialect,
) -> None:
    connection.ensure_connection()
    before = getattr(connection, "transaction_mode", None)
    row = new_row()
    with d.atomic_run_mode(), transaction.atomic():
        # DEFERRED where the database has begin modes (SQLite): the write lock is taken
        # at the run's first write, not for the whole run.
        assert getattr(connection, "transaction_mode", None) is None
        d.insert_jobs([row])
    assert getattr(connection, "transaction_mode", None) == before
    assert Job.objects.filter(id=row.id).exists()


# --- what the system checks ask ------------------------------------------------------------


def test_the_server_is_new_enough_and_named_as_its_vendor_counts_versions(d: Dialect) -> None:
    name, version, least = d.server()
    assert version >= least
    assert least in (*MINIMUM_VERSIONS.values(), MySQL.mariadb_minimum)
    if getattr(connection, "mysql_is_mariadb", False):
        assert (name, least) == ("MariaDB", MySQL.mariadb_minimum)
    assert d.claim_needs


@pytest.mark.parametrize("session_zone", ["UTC", "Asia/Tokyo"])
def test_the_dialect_reads_times_as_a_django_cursor_does(session_zone: str) -> None:
    """PostgreSQL's dialect reads timestamptz with psycopg's own loader where the session
    and Django's connection are both in UTC; elsewhere as Django does. Either way what it
    reads is what a Django cursor reads of the same statement."""
    d = for_alias("default")
    if not isinstance(d, PostgreSQL) and session_zone != "UTC":
        pytest.skip("a session time zone of its own is PostgreSQL's")
    moment = timezone.now().replace(microsecond=123456)
    query = (
        "SELECT %s, %s, NULL"
        if d.vendor != "postgresql"
        else (
            "SELECT %s::timestamptz, %s::timestamptz + interval '1 microsecond', NULL::timestamptz"
        )
    )
    with transaction.atomic():
        if session_zone != "UTC":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL TIME ZONE '{session_zone}'")
        [through_dialect] = d.run(query, [moment, moment])
        with connection.cursor() as cursor:
            cursor.execute(query, [moment, moment])
            [through_django] = cursor.fetchall()
    assert through_dialect == through_django
    if d.vendor == "postgresql":
        # Django puts its zone (UTC) on what the session wrote in Tokyo's: only in a UTC
        # session is the moment read back as written.
        assert (through_dialect[0] == moment) is (session_zone == "UTC")
        assert through_dialect[1] - through_dialect[0] == timedelta(microseconds=1)
        assert [getattr(v, "tzinfo", None) for v in through_dialect] == [
            getattr(v, "tzinfo", None) for v in through_django
        ]


@pytest.mark.django_db(transaction=True)
def test_postgresql_keeps_one_cursor_a_connection_and_a_new_one_after_a_reconnect() -> None:
    """The dialect's statements go through a cursor kept for the connection (made once,
    not per statement), which a failed statement leaves usable and a new connection
    replaces."""
    d = for_alias("default")
    if not isinstance(d, PostgreSQL):
        pytest.skip("PostgreSQL's dialect keeps its cursors")
    assert d.run("SELECT %s::int", [1]) == [(1,)]
    first = connection.connection
    kept = dict(vars(connections["default"])["_django_jobqueue_cursors"].cursors)
    assert d.run("SELECT %s::int + 1", [1]) == [(2,)]
    assert vars(connections["default"])["_django_jobqueue_cursors"].cursors == kept
    with pytest.raises(DatabaseError):
        d.run("SELECT 1 / %s::int", [0])
    assert d.run("SELECT %s::text", ["after"]) == [("after",)]
    connection.close()
    assert d.run("SELECT %s::int", [3]) == [(3,)]
    assert connection.connection is not first
    now_kept = vars(connections["default"])["_django_jobqueue_cursors"].cursors
    assert now_kept
    assert not set(map(id, now_kept.values())) & set(map(id, kept.values()))
