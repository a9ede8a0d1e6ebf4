"""The bulk path's stream of rows (``store.bulk``: one COPY on PostgreSQL, multi-row
INSERTs elsewhere): what it writes is what the one-row insert writes, column for
column; it joins the caller's transaction, wakes each queue once on commit and none on
rollback, and keyed and merging items keep their order and dispositions beside it."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.storage import NewRow, StorageStatements
from django_jobqueue.task.options import Options, build_request
from django_jobqueue.task.submit import submit_many
from tests.helpers import is_mysql, is_postgres, postgres_only
from tests.taskapp import tasks
from tests.taskapp.tasks import Sync

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

KIND = "tests.bulk_copy"


def _rows(count: int, **fields: Any) -> list[NewRow]:
    """Rows that set every column a new row has, odd values included: a payload with
    escapes, a tab, a line end and a backslash in its text, keys, a trace context."""
    now = timezone.now()
    rows = []
    for n in range(count):
        values: dict[str, Any] = {
            "id": uuid7(),
            "kind": KIND,
            "queue": "mail" if n % 2 else "default",
            "payload": json.dumps({"n": n, "text": 'tab\there\nline "q" back\\slash é'}),
            "priority": n % 3,
            "created_at": now,
            "visible_at": now + timedelta(minutes=n),
            "dedup_key": f"d\t{n}" if n % 3 == 0 else None,
            "idempotency_key": None,
            "trace_context": '{"traceparent": "00-abc\\\\x"}' if n % 2 else "",
            "job_key": f"tenant\\{n % 2}" if n % 4 else None,
        }
        values.update(fields)
        rows.append(NewRow(**values))
    return rows


def _columns(job: Job) -> dict[str, Any]:
    """Every column of a job's row but its id."""
    values = {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}
    values.pop("id")
    return values


def test_the_bulk_stream_writes_exactly_what_the_one_row_insert_writes() -> None:
    d = for_alias("default")
    many = _rows(7)
    # The same rows, other ids, each through the portable one-row VALUES insert.
    one_by_one = [dataclasses.replace(row, id=uuid7()) for row in many]
    with transaction.atomic():
        d.insert_jobs(iter(many))  # a stream: PostgreSQL's COPY
        for row in one_by_one:
            StorageStatements.insert_jobs(d, [row])
    found = Job.objects.in_bulk([r.id for r in [*many, *one_by_one]])
    for bulk, single in zip(many, one_by_one, strict=True):
        assert _columns(found[bulk.id]) == _columns(found[single.id])
    first = found[many[1].id]
    assert first.payload["text"] == 'tab\there\nline "q" back\\slash é'
    assert (first.trace_context, first.key, first.dedup_key) == (
        '{"traceparent": "00-abc\\\\x"}',
        "tenant\\1",
        None,
    )
    assert found[many[3].id].visible_at == many[3].visible_at


def test_enqueue_many_writes_what_enqueue_writes_with_delay_and_key() -> None:
    options = {"delay": timedelta(minutes=5), "queue": "mail", "priority": 1}
    [bulk, _] = tasks.in_order.using(**options).enqueue_many(
        [{"shop": 1, "seq": 1, "seconds": 0}, {"shop": 2, "seq": 2, "seconds": 0}]
    )
    single = tasks.in_order.using(**options).enqueue(shop=1, seq=1, seconds=0)
    rows = Job.objects.in_bulk([bulk.id, single.id])
    written, reference = _columns(rows[bulk.id]), _columns(rows[single.id])
    for row in (written, reference):  # written a moment apart: the delay is the same
        row["visible_at"] -= row.pop("created_at")
    assert written == reference
    assert (written["key"], written["visible_at"]) == ("shop:1", timedelta(minutes=5))


@pytest.mark.skipif(not (is_postgres() or is_mysql()), reason="SQLite stores any text as JSON")
def test_a_row_the_database_refuses_writes_nothing_and_leaves_the_transaction_usable() -> None:
    d = for_alias("default")
    rows = _rows(5)
    rows[3].payload = '{"unclosed": '  # what no payload the task layer made can be
    with transaction.atomic():
        tasks.add.enqueue(0, 0)
        with pytest.raises(DatabaseError), transaction.atomic():
            d.insert_jobs(iter(rows))
        tasks.add.enqueue(1, 1)
    assert not Job.objects.filter(kind=KIND).exists()
    assert Job.objects.count() == 2


def test_keyed_and_merging_items_keep_their_order_and_dispositions_among_plain_ones() -> None:
    plain = build_request(tasks.add, {"a": 1, "b": 1}, Options(), payload_json='{"a":1,"b":1}')
    keyed = build_request(
        tasks.add, {"a": 2, "b": 2}, Options(idempotency_key="k"), payload_json='{"a":2,"b":2}'
    )
    merging = Sync(7, items=["a"]).using().request()
    merging_again = Sync(7, items=["b"]).using().request()
    requests = [plain] * 3 + [keyed, merging] + [plain] * 3 + [keyed, merging_again, plain]
    handles = submit_many(requests)
    assert [h.disposition for h in handles] == [
        *["inserted"] * 5,
        *["inserted"] * 3,
        "reused",
        "merged",
        "inserted",
    ]
    assert handles[8].id == handles[3].id
    assert handles[9].id == handles[4].id
    plain_ids = [h.id for i, h in enumerate(handles) if requests[i] is plain]
    assert plain_ids == sorted(plain_ids)  # claim order follows the list
    assert Job.objects.filter(id__in=plain_ids).count() == 7
    assert Job.objects.count() == 9
    assert Job.objects.get(id=handles[4].id).payload["items"] == ["a", "b"]
    assert [e.outcome for e in JournalEntry.objects.filter(job_id=handles[4].id)] == ["merged"]


def _listener() -> Any:
    listener = connection.get_new_connection(connection.get_connection_params())
    listener.autocommit = True
    listener.execute('LISTEN "django_jobqueue"')
    return listener


@postgres_only
@pytest.mark.django_db(transaction=True)  # the NOTIFY goes out on a real commit
def test_one_copy_of_many_queues_wakes_each_queue_once_on_commit() -> None:
    listener = _listener()
    try:
        rows = _rows(3000)  # both queues, in pieces
        with transaction.atomic():
            for_alias("default").insert_jobs(iter(rows))
            assert list(listener.notifies(timeout=0.3)) == []  # nothing before commit
        notes = list(listener.notifies(timeout=1.0, stop_after=10))
        assert sorted(n.payload for n in notes) == ["default", "mail"]
    finally:
        listener.close()


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_bulk_rolled_back_wakes_no_one_and_leaves_nothing() -> None:
    listener = _listener()
    try:

        def order_that_fails() -> None:
            with transaction.atomic():
                tasks.add.enqueue_many([{"a": n, "b": n} for n in range(2000)])
                raise RuntimeError("the caller's transaction fails")

        with pytest.raises(RuntimeError):
            order_that_fails()
        assert list(listener.notifies(timeout=0.5)) == []
        assert Job.objects.count() == 0
    finally:
        listener.close()
