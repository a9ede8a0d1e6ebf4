"""What each database guarantees: claims under concurrent workers, the idempotency key
held by the database itself, and the checks that say what differs on MySQL/MariaDB.

Runs on every database of the test script (PostgreSQL, SQLite, MariaDB); the
MySQL/MariaDB-only tests skip elsewhere, saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.core import checks
from django.db import IntegrityError, connection, connections, models, transaction
from django.utils import timezone

from django_jobqueue import Status, store
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.task.registry import registry
from tests.helpers import WorkerThread, in_thread, is_mysql, mysql_only, wait_for
from tests.taskapp import tasks

KINDS = registry.kinds


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_run_each_job_exactly_once(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    jobs = [tasks.record.enqueue(n=i) for i in range(120)]
    for _ in range(3):
        worker_thread(concurrency=4, poll_interval=0.1)

    wait_for(lambda: not Job.objects.exclude(status=Status.COMPLETED).exists(), timeout=60)
    from tests.taskapp.models import Execution

    runs = list(Execution.objects.values_list("job_id", flat=True))
    assert sorted(map(str, runs)) == sorted(str(j.id) for j in jobs)  # once each, none lost
    completed = JournalEntry.objects.filter(outcome="completed").values_list("job_id", flat=True)
    assert sorted(map(str, completed)) == sorted(str(j.id) for j in jobs)


@pytest.mark.django_db(transaction=True)
def test_a_claim_skips_a_row_another_session_has_locked() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its writers take turns")
    first = tasks.add.enqueue(1, 1)
    second = tasks.add.enqueue(2, 2)
    locked = threading.Event()
    release = threading.Event()

    def hold_first() -> None:
        with transaction.atomic():
            list(Job.objects.select_for_update().filter(id=first.id))
            locked.set()
            release.wait(30)

    holder = in_thread(hold_first)
    try:
        assert locked.wait(30)
        claimed = store.claim_jobs(
            worker_id="w:1", request=store.ClaimRequest(limit=10, kinds=KINDS())
        )
        assert [c.id for c in claimed] == [second.id]  # not blocked, first skipped
    finally:
        release.set()
        holder.result(30)
    assert [
        c.id
        for c in store.claim_jobs(
            worker_id="w:2", request=store.ClaimRequest(limit=10, kinds=KINDS())
        )
    ] == [first.id]


@pytest.mark.sqlite
@pytest.mark.django_db(transaction=True)
def test_max_in_flight_holds_for_claims_racing_on_many_connections() -> None:
    for i in range(20):
        tasks.add.enqueue(i, i)
    racers = 6
    start = threading.Barrier(racers)

    def claim(i: int) -> int:
        start.wait(30)
        got = store.claim_jobs(
            worker_id=f"w:{i}",
            request=store.ClaimRequest(
                limit=4, kinds=[tasks.add.kind], max_in_flight={tasks.add.kind: 2}
            ),
        )
        return len(got)

    claimed = [in_thread(lambda i=i: claim(i)) for i in range(racers)]  # type: ignore[misc]
    assert sum(f.result(60) for f in claimed) == 2
    assert Job.objects.filter(status=Status.CLAIMED).count() == 2


@pytest.mark.sqlite
@pytest.mark.django_db
def test_the_database_itself_refuses_a_second_active_job_with_a_key() -> None:
    """Past the enqueue code: an ORM write of a second active row with the key fails,
    and the key is free again once its job is finished."""
    held = tasks.add.using(idempotency_key="order-7").enqueue(1, 2)
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(kind=tasks.add.kind, idempotency_key="order-7")
    Job.objects.filter(id=held.id).update(status=Status.COMPLETED, finished_at=timezone.now())
    again = Job.objects.create(kind=tasks.add.kind, idempotency_key="order-7")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(id=held.id).update(status=Status.PENDING)  # a requeue would clash
    assert again.status == Status.PENDING


@pytest.mark.sqlite
@pytest.mark.django_db
def test_idempotency_keys_are_compared_byte_for_byte() -> None:
    lower = tasks.add.using(idempotency_key="abc").enqueue(1, 2)
    upper = tasks.add.using(idempotency_key="ABC").enqueue(1, 2)
    spaced = tasks.add.using(idempotency_key="abc ").enqueue(1, 2)
    assert len({lower.id, upper.id, spaced.id}) == 3
    assert {lower.disposition, upper.disposition, spaced.disposition} == {"inserted"}


@pytest.mark.django_db(transaction=True)
def test_two_sessions_enqueueing_one_key_at_once_make_one_job() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises the two writers: nothing races")
    started = threading.Barrier(2)

    def enqueue_keyed() -> tuple[str, str]:
        with transaction.atomic():
            started.wait(30)
            handle = tasks.add.using(idempotency_key="race").enqueue(1, 2)
            return str(handle.id), handle.disposition

    results = [in_thread(enqueue_keyed) for _ in range(2)]
    (id1, how1), (id2, how2) = (r.result(60) for r in results)
    assert id1 == id2
    assert sorted([how1, how2]) == ["inserted", "reused"]
    assert Job.objects.filter(idempotency_key="race").count() == 1


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_bulk_enqueue_larger_than_mysqls_packet_limit_is_written_whole() -> None:
    """24 payloads of 800 kB: 19 MB, more than MySQL's default max_allowed_packet (16 MiB)
    in one statement; the bulk insert splits by size there."""
    big = "x" * 800_000
    handles = tasks.add.enqueue_many([{"a": i, "b": big} for i in range(24)])
    assert Job.objects.count() == 24
    row = Job.objects.get(id=handles[23].id)
    assert row.payload == {"a": 23, "b": big}


# --- checks ---------------------------------------------------------------------------


@mysql_only
@pytest.mark.django_db(transaction=True)
def test_a_worker_whose_connections_the_server_kills_reconnects_and_goes_on(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    """MySQL reports a lost connection as error 2006/2013, and a statement's own fault
    with the same exception class: the worker must tell them apart and reconnect."""
    worker = worker_thread(concurrency=2, poll_interval=0.2)
    first = tasks.add.enqueue(1, 2)
    wait_for(lambda: Job.objects.get(id=first.id).status == Status.COMPLETED)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ID FROM information_schema.PROCESSLIST"
            " WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
        )
        others = [row[0] for row in cursor.fetchall()]
        assert others  # the worker's connections
        for pid in others:
            cursor.execute(f"KILL CONNECTION {int(pid)}")
    second = tasks.add.enqueue(3, 4)
    wait_for(lambda: Job.objects.get(id=second.id).status == Status.COMPLETED, timeout=30)
    assert worker.thread.is_alive()
    worker.stop()  # raises what the worker raised, if anything


@mysql_only
@pytest.mark.django_db
def test_checks_on_mariadb_say_what_differs_and_drop_only_djangos_replaced_warnings() -> None:
    messages = checks.run_checks(databases=["default"], include_deployment_checks=False)
    ids = [m.id for m in messages]
    assert "django_jobqueue.W010" in ids
    assert "django_jobqueue.E003" not in ids  # this server has SKIP LOCKED
    replaced = {"models.W036", "models.W037"}
    assert not [m for m in messages if m.id in replaced and m.obj in (Job, JournalEntry)]
    # Django itself does warn of them for these models: the test above means something.
    djangos = models.Model.check.__func__(Job, databases=["default"])  # type: ignore[attr-defined]
    assert replaced <= {m.id for m in djangos}


@mysql_only
@pytest.mark.django_db
def test_mariadb_has_the_generated_key_column_and_status_led_indexes() -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SHOW INDEX FROM django_jobqueue_job")
        columns: dict[str, list[str]] = {}
        rows = cursor.fetchall()  # Non_unique, Key_name, Seq_in_index, Column_name
        for row in rows:
            columns.setdefault(row[2], []).append(row[4])
    unique = {row[2] for row in rows if not row[1]}
    assert columns["jobqueue_job_idempotency_active"] == ["idempotency_active"]
    assert columns["jobqueue_job_claim"] == ["status", "priority", "visible_at", "id"]
    assert "jobqueue_job_next" not in columns  # dropped by migration 0028
    assert columns["jobqueue_job_lease"] == ["status", "claim_expires_at"]
    assert columns["jobqueue_job_dedup"] == ["status", "kind", "dedup_key", "created_at"]
    # Whole, as migration 0012 built it: no partial indexes here (0027 leaves it).
    assert columns["jobqueue_job_step_name_unique"] == ["workflow_id", "step_name"]
    assert "jobqueue_job_step_name_unique" in unique


@pytest.mark.skipif(is_mysql(), reason="checks the other databases")
@pytest.mark.sqlite
@pytest.mark.django_db
def test_checks_elsewhere_say_nothing_of_mysql() -> None:
    ids = [m.id for m in checks.run_checks(databases=["default"])]
    assert "django_jobqueue.W010" not in ids
    assert "django_jobqueue.W011" not in ids
