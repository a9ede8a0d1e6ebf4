"""The public paths fail with typed django_jobqueue errors that name what is wrong and
write nothing: a Django Tasks kind given to enqueue(), an idempotency key that keeps
changing hands, and bad filters of history(), cleanup() and throughput(). Each error
stays the builtin it was before it had a type, for callers that catch that."""

from __future__ import annotations

import importlib
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

import django_jobqueue
from django_jobqueue import (
    InvalidFilter,
    JobQueueError,
    KeyContended,
    Status,
    UnknownFilter,
    UnknownKind,
    store,
)
from django_jobqueue.backend.compat import task_backends
from django_jobqueue.ids import uuid7
from django_jobqueue.models import Job, JournalEntry
from tests.djtasks import tasks as django_tasks
from tests.taskapp import tasks

# The module, not the function ``store`` re-exports under its name.
enqueue_store = importlib.import_module("django_jobqueue.store.inserting")

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def counts() -> tuple[int, int]:
    return Job.objects.count(), JournalEntry.objects.count()


def test_enqueue_of_a_django_tasks_kind_is_an_unknown_kind_naming_it() -> None:
    defn = task_backends["default"].definition(django_tasks.add)  # type: ignore[attr-defined]
    with pytest.raises(UnknownKind, match="not a django_jobqueue task") as info:
        django_jobqueue.enqueue(defn.kind, 1, 2)
    assert info.value.kind == "tests.djtasks.tasks.add"
    assert "tests.djtasks.tasks.add" in str(info.value)
    assert "django.tasks" in str(info.value)
    assert isinstance(info.value, LookupError)
    assert counts() == (0, 0)


@pytest.fixture
def key_changing_hands(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Another job takes the key ``contended`` just after each look-up for its holder,
    and finishes just before the next one: the enqueue's insert always finds the key
    held, and its look-up always comes too late. (The other job's writes are real rows;
    only their timing is arranged, around the store's own look-up. PostgreSQL's insert
    goes through psycopg's own cursor, out of reach of ``connection.execute_wrapper``.)"""
    holders: list[str] = []
    look_up = enqueue_store.active_by_key

    def racing(key: str) -> Job | None:
        Job.objects.filter(idempotency_key=key, status=Status.PENDING).update(
            status=Status.COMPLETED, finished_at=timezone.now()
        )
        found = look_up(key)
        holder = Job.objects.create(id=uuid7(), kind=tasks.add.kind, idempotency_key=key)
        holders.append(str(holder.id))
        return found

    monkeypatch.setattr(enqueue_store, "active_by_key", racing)
    return holders


def test_a_key_that_keeps_changing_hands_is_key_contended_and_writes_nothing(
    key_changing_hands: list[str],
) -> None:
    with pytest.raises(KeyContended, match="'contended' kept changing hands") as info:
        tasks.add.using(idempotency_key="contended").enqueue(1, 2)
    assert (info.value.key, info.value.kind) == ("contended", tasks.add.kind)
    assert isinstance(info.value, RuntimeError)
    # The first look-up comes before any insert; then three inserts each found the key
    # held. Only the other jobs are rows; none is ours.
    assert len(key_changing_hands) == 4
    assert sorted(str(i) for i in Job.objects.values_list("id", flat=True)) == sorted(
        key_changing_hands
    )
    assert not Job.objects.filter(payload={"a": 1, "b": 2}).exists()


@pytest.mark.parametrize(
    ("filters", "argument", "message"),
    [
        ({"status": "running"}, "status", "Unknown status running; known: waiting, pending"),
        ({"after": "garbage"}, "after", "Invalid history cursor 'garbage'"),
        ({"limit": 0}, "limit", "limit must be a positive int, got 0"),
        ({"limit": "10"}, "limit", "limit must be a positive int, got '10'"),
        ({"kind": 7}, "kind", "kind"),
        ({"status": 3}, "status", "Unknown status 3"),
        ({"queue": "q" * 201}, "queue", "queue"),
    ],
)
def test_history_refuses_a_bad_filter_value_with_invalid_filter(
    filters: dict[str, Any], argument: str, message: str
) -> None:
    with pytest.raises(InvalidFilter, match=message) as info:
        django_jobqueue.history(**filters)
    assert info.value.argument == argument
    assert isinstance(info.value, ValueError)
    assert not isinstance(info.value, UnknownFilter)


def test_history_refuses_an_unknown_filter_with_unknown_filter_naming_the_known_ones() -> None:
    with pytest.raises(UnknownFilter, match=r"unknown filter\(s\) kinds; known: kind,") as info:
        django_jobqueue.history(kinds=["a"])  # type: ignore[call-arg]
    assert info.value.argument == "kinds"
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, InvalidFilter)


def test_cleanup_refuses_a_live_status_or_a_bad_kind_and_deletes_nothing() -> None:
    old = timezone.now() - timedelta(days=30)
    Job.objects.create(id=uuid7(), kind="k", status=Status.COMPLETED, finished_at=old)
    before = counts()
    with pytest.raises(InvalidFilter, match="cleanup deletes only finished jobs") as info:
        django_jobqueue.cleanup(finished_before=timezone.now(), status="pending")
    assert info.value.argument == "status"
    assert "not pending" in str(info.value)
    with pytest.raises(InvalidFilter, match="not 3") as info:
        django_jobqueue.cleanup(finished_before=timezone.now(), status=3)  # type: ignore[arg-type]
    assert info.value.argument == "status"
    with pytest.raises(InvalidFilter, match="kind") as info:
        django_jobqueue.cleanup(finished_before=timezone.now(), kind="k" * 201)
    assert info.value.argument == "kind"
    with pytest.raises(InvalidFilter, match="finished_before must be a datetime, got '7d'"):
        django_jobqueue.cleanup(finished_before="7d")  # type: ignore[arg-type]
    assert counts() == before == (1, 0)


def test_throughput_refuses_an_unknown_bucket_naming_the_known_ones() -> None:
    with pytest.raises(InvalidFilter, match="bucket is minute or hour, got 'week'") as info:
        store.throughput(since=timezone.now(), bucket="week")
    assert info.value.argument == "bucket"
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, JobQueueError)
