"""Bad input raises a clear django_jobqueue error at enqueue and writes nothing."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction

from django_jobqueue import (
    EnqueueError,
    InvalidArguments,
    InvalidOption,
    InvalidPayload,
    UnknownKind,
    enqueue,
)
from django_jobqueue.models import Job, JournalEntry
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def circle(container: Any = None) -> Any:
    """A list (or the dict given) that holds itself, one level down."""
    if container is None:
        container = []
        container.append([container])
    else:
        container["again"] = {"inner": container}
    return container


CASES: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "unknown kind": (
        lambda: enqueue("no.such.kind", 1),
        UnknownKind,
        "No task is registered under kind 'no.such.kind'",
    ),
    "misspelt kind": (
        lambda: enqueue("tests.taskapp.tasks.ad", 1, 2),
        UnknownKind,
        "No task is registered under kind 'tests.taskapp.tasks.ad' (did you mean "
        "'tests.taskapp.tasks.add'?)",
    ),
    "misspelt keyword, not a missing one": (
        lambda: tasks.declined.enqueue(mesage="card declined"),
        InvalidArguments,
        "got an unexpected keyword argument 'mesage' (did you mean 'message'?)",
    ),
    "payload not JSON": (
        lambda: tasks.add.enqueue(1, dt.date(2020, 1, 1)),
        InvalidPayload,
        "argument 'b' is not JSON-serialisable",
    ),
    "nested payload not JSON": (
        lambda: tasks.record.enqueue(n={"when": {1, 2}}),
        InvalidPayload,
        "argument 'n' is not JSON-serialisable",
    ),
    # A value that holds itself: named, not walked forever (the check that names the
    # bad part once walked a circle until memory ran out).
    "a list holding itself": (
        lambda: tasks.add.enqueue(circle(), 2),
        InvalidPayload,
        "argument 'a' is not JSON-serialisable (Circular reference detected)",
    ),
    "a dict holding itself, in a bulk": (
        lambda: tasks.record.enqueue_many([{"n": 1}, {"n": {"ok": [1], "me": circle({})}}]),
        InvalidPayload,
        "item 1: tests.taskapp.tasks.record: argument 'n' is not JSON-serialisable (Circular",
    ),
    "NaN is not JSON": (
        lambda: tasks.add.enqueue(1, float("nan")),
        InvalidPayload,
        "argument 'b'",
    ),
    "missing argument": (
        lambda: tasks.add.enqueue(1),
        InvalidArguments,
        "missing a required argument: 'b'",
    ),
    "unexpected argument": (
        lambda: tasks.add.enqueue(1, 2, c=3),
        InvalidArguments,
        "got an unexpected keyword argument 'c'",
    ),
    "too many arguments": (lambda: tasks.add.enqueue(1, 2, 3), InvalidArguments, "too many"),
    "class task with wrong fields": (
        lambda: enqueue("tests.sync", nope=1),
        InvalidArguments,
        "tests.sync",
    ),
    "priority out of range": (
        lambda: tasks.add.using(priority=7).enqueue(1, 2),
        InvalidOption,
        "priority must be one of [0, 1, 2]",
    ),
    "priority not an int": (
        lambda: tasks.add.using(priority="high").enqueue(1, 2),
        InvalidOption,
        "priority",
    ),
    "negative delay": (
        lambda: tasks.add.using(delay=timedelta(seconds=-1)).enqueue(1, 2),
        InvalidOption,
        "delay must not be negative",
    ),
    "naive run_at": (
        lambda: tasks.add.using(run_at=dt.datetime(2030, 1, 1)).enqueue(1, 2),
        InvalidOption,
        "run_at must be a timezone-aware datetime",
    ),
    "empty queue name": (
        lambda: tasks.add.using(queue="").enqueue(1, 2),
        InvalidOption,
        "queue must be a non-empty string",
    ),
    "unknown option": (
        lambda: tasks.add.using(prio=1).enqueue(1, 2),
        InvalidOption,
        "Unknown enqueue option(s): prio",
    ),
    "idempotency key too long": (
        lambda: tasks.add.using(idempotency_key="k" * 300).enqueue(1, 2),
        InvalidOption,
        "idempotency_key must be a non-empty string of at most 255 characters",
    ),
    "task instance with extra arguments": (
        lambda: enqueue(tasks.Sync(1), 2),
        InvalidArguments,
        "takes no further arguments",
    ),
    "not a task at all": (lambda: enqueue(42), InvalidArguments, "not int"),  # type: ignore[arg-type]
    "a Task subclass without run()": (
        lambda: enqueue(tasks.NoRun()),
        UnknownKind,
        "NoRun defines no run(self, ctx), so it is not a task",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_and_writes_nothing(case: str) -> None:
    call, error, message = CASES[case]
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)
    assert isinstance(info.value, EnqueueError)
    assert Job.objects.count() == 0
    assert JournalEntry.objects.count() == 0


def test_bad_input_inside_a_transaction_leaves_the_callers_work_intact() -> None:
    with transaction.atomic():
        first = tasks.add.enqueue(1, 2)
        with pytest.raises(InvalidPayload):
            tasks.add.enqueue(1, object())
        second = tasks.add.enqueue(3, 4)
    assert set(Job.objects.values_list("id", flat=True)) == {first.id, second.id}


def test_enqueue_in_a_rolled_back_transaction_leaves_no_job() -> None:
    class Boom(Exception):
        pass

    def signup() -> None:
        with transaction.atomic():
            Execution.objects.create(job_id=uuid.uuid4(), kind="x", run_no=0, pid=0)
            tasks.add.enqueue(1, 2)
            raise Boom

    with pytest.raises(Boom):
        signup()
    assert Job.objects.count() == 0
    assert Execution.objects.count() == 0


def test_errors_carry_the_facts() -> None:
    with pytest.raises(InvalidPayload) as info:
        tasks.add.enqueue(1, object())
    assert info.value.argument == "b"  # type: ignore[attr-defined]
    assert info.value.kind == tasks.add.kind  # type: ignore[attr-defined]
    with pytest.raises(UnknownKind) as unknown:
        enqueue("nope.kind")
    assert unknown.value.kind == "nope.kind"  # type: ignore[attr-defined]
