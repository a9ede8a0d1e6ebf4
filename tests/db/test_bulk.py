"""Bulk enqueue: ``enqueue_many`` on @task functions, Task classes and the package."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from django_jobqueue import (
    InvalidArguments,
    InvalidPayload,
    Priority,
    Status,
    enqueue_many,
    store,
)
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.store import EnqueueRequest
from tests.helpers import postgres_only, run_burst
from tests.taskapp import tasks
from tests.taskapp.tasks import Sync

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.mark.django_db(transaction=True)
def test_enqueue_many_writes_every_item_and_returns_handles_in_order() -> None:
    handles = tasks.add.enqueue_many([{"a": n, "b": n} for n in range(1200)])
    assert [h.disposition for h in handles] == ["inserted"] * 1200
    assert all(h.status == Status.PENDING and h.kind == tasks.add.kind for h in handles)
    rows = {j.id: j for j in Job.objects.all()}
    assert len(rows) == 1200
    for n, h in enumerate(handles):
        assert rows[h.id].payload == {"a": n, "b": n}
    # The ids are time-ordered in item order, so claim order follows the list.
    assert [h.id for h in handles] == sorted(h.id for h in handles)
    assert handles[5].job.payload == {"a": 5, "b": 5}  # read on first use
    assert run_burst() == 1200
    assert handles[7].refresh().result == 14


def test_enqueue_many_honours_using_options() -> None:
    later = timezone.now() + timedelta(hours=1)
    handles = tasks.add.using(priority=Priority.LOW, queue="mail", run_at=later).enqueue_many(
        [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    )
    rows = Job.objects.filter(id__in=[h.id for h in handles])
    assert {(r.priority, r.queue, r.visible_at) for r in rows} == {(Priority.LOW, "mail", later)}


def test_enqueue_many_joins_the_callers_transaction() -> None:
    def order_that_fails() -> None:
        with transaction.atomic():
            tasks.add.enqueue_many([{"a": 1, "b": 1}, {"a": 2, "b": 2}])
            assert Job.objects.count() == 2
            raise RuntimeError("roll it all back")

    with pytest.raises(RuntimeError):
        order_that_fails()
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    ("items", "error", "message"),
    [
        ([{"a": 1, "b": 1}, {"a": 1}], InvalidArguments, "item 1: "),
        ([{"a": 1, "b": 1}, {"a": 1, "b": 1}, {"a": object(), "b": 1}], InvalidPayload, "item 2: "),
        (
            [{"a": 1, "b": 1}, (1, 2)],
            InvalidArguments,
            "item 1: tests.taskapp.tasks.add takes a dict",
        ),
        ([{"a": 1, "b": 1}, {"a": 1, "b": 1, "c": 3}], InvalidArguments, "item 1: "),
    ],
)
def test_a_bad_item_names_its_index_and_nothing_is_written(
    items: list[object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        tasks.add.enqueue_many(items)  # type: ignore[arg-type]
    assert info.value.index == len(items) - 1  # type: ignore[attr-defined]
    assert Job.objects.count() == 0


def test_a_bad_item_leaves_the_callers_transaction_usable() -> None:
    with transaction.atomic():
        tasks.add.enqueue(0, 0)
        with pytest.raises(InvalidPayload):
            tasks.add.enqueue_many([{"a": 1, "b": 1}, {"a": {1, 2}, "b": 1}])
        tasks.add.enqueue(1, 1)
    assert Job.objects.count() == 2


@pytest.mark.parametrize("sized", [True, False], ids=["list", "generator"])
def test_a_bad_item_after_thousands_written_rolls_the_whole_batch_back(
    sized: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list is checked as it is written (``store.enqueue_stream``): the rows before
    its bad item are already with the server (more than one piece of the COPY) when the
    item is read. A generator is checked whole first. Either way the error names the
    item, nothing of the batch is written, and the caller's transaction goes on."""
    streamed: list[int] = []
    real = store.enqueue_stream

    def spy(template: EnqueueRequest, requests: Iterator[EnqueueRequest], count: int) -> Any:
        streamed.append(count)
        return real(template, requests, count)

    monkeypatch.setattr(store, "enqueue_stream", spy)
    items = [{"a": n, "b": n} for n in range(5000)]
    items[4500] = {"a": {4500}, "b": 1}
    with transaction.atomic():
        tasks.add.enqueue(0, 0)
        with pytest.raises(InvalidPayload, match="item 4500: ") as info:
            tasks.add.enqueue_many(items if sized else (item for item in items))
        assert info.value.index == 4500
        tasks.add.enqueue(1, 1)
    assert sorted(Job.objects.values_list("payload", flat=True), key=str) == [
        {"a": 0, "b": 0},
        {"a": 1, "b": 1},
    ]
    assert streamed == ([5000] if sized else [])
    assert gc.isenabled()  # held off while the batch ran, on again after its error


def test_idempotency_keys_are_honoured_within_and_across_bulk_calls() -> None:
    first = tasks.add.using(idempotency_key="order-1").enqueue(1, 1)
    handles = tasks.add.using(idempotency_key="order-1").enqueue_many([{"a": 2, "b": 2}])
    assert handles[0].disposition == "reused"
    assert handles[0].id == first.id
    mixed = enqueue_many(
        [Sync(1).using(idempotency_key="k"), Sync(2), Sync(3).using(idempotency_key="k")]
    )
    assert [h.disposition for h in mixed] == ["inserted", "inserted", "reused"]
    assert mixed[2].id == mixed[0].id
    assert Job.objects.count() == 3


def test_dedup_merges_are_honoured_in_a_bulk_enqueue() -> None:
    handles = Sync.enqueue_many([Sync(7, items=["a"]), Sync(8), Sync(7, items=["b"])])
    assert [h.disposition for h in handles] == ["inserted", "inserted", "merged"]
    assert handles[2].id == handles[0].id
    assert Job.objects.get(id=handles[0].id).payload["items"] == ["a", "b"]
    assert [e.outcome for e in JournalEntry.objects.filter(job_id=handles[0].id)] == ["merged"]


def test_task_class_enqueue_many_takes_only_its_own_instances() -> None:
    with pytest.raises(InvalidArguments, match="item 1 must be a Sync instance") as info:
        Sync.enqueue_many([Sync(1), tasks.add])  # type: ignore[list-item]
    assert info.value.index == 1  # type: ignore[attr-defined]
    with pytest.raises(InvalidPayload, match="item 1: ") as info:
        enqueue_many([Sync(1), Sync(2, items=[object()])])  # type: ignore[list-item]
    assert info.value.index == 1  # type: ignore[attr-defined]
    assert Job.objects.count() == 0


@postgres_only
@pytest.mark.django_db(transaction=True)  # the NOTIFY goes out on a real commit
def test_a_bulk_insert_sends_one_notify_per_queue_on_commit() -> None:
    listener = connection.get_new_connection(connection.get_connection_params())
    listener.autocommit = True
    try:
        listener.execute('LISTEN "django_jobqueue"')
        with transaction.atomic():
            tasks.add.enqueue_many([{"a": n, "b": n} for n in range(500)])
            tasks.add.using(queue="mail").enqueue_many([{"a": n, "b": n} for n in range(500)])
            assert list(listener.notifies(timeout=0.3)) == []  # nothing before commit
        notes = list(listener.notifies(timeout=1.0, stop_after=10))
        assert sorted(n.payload for n in notes) == ["default", "mail"]
    finally:
        listener.close()
