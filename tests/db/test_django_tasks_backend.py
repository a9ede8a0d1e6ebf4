"""JobQueueBackend's own surface: bad input refused before anything is written, results
looked up by id, transactions, the async API, and operators' cancel/requeue/stats."""

from __future__ import annotations

import datetime as dt
import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone

from django_jobqueue import InvalidArguments, InvalidPayload, cancel, enqueue, requeue, stats
from django_jobqueue.backend.compat import (
    InvalidTask,
    TaskResultDoesNotExist,
    task_backends,
)
from django_jobqueue.models import Job
from tests.djtasks import tasks
from tests.helpers import WorkerThread, run_burst, wait_for
from tests.taskapp import tasks as own_tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

try:
    from django.tasks.exceptions import TaskResultMismatch
except ImportError:  # Django 5.2: the backport
    from django_tasks.exceptions import TaskResultMismatch  # type: ignore[no-redef]


def backend() -> object:
    return task_backends["default"]


# --- bad input --------------------------------------------------------------------------


def test_naive_run_after_is_refused() -> None:
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.add.using(run_after=dt.datetime(2030, 1, 1, 12, 0))


def test_out_of_range_priority_is_refused() -> None:
    with pytest.raises(InvalidTask, match="priority must be a whole number between -100 and 100"):
        tasks.add.using(priority=101)


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        ((object(), 1), {}, "args[0]"),
        ((1, {1, 2}), {}, "args[1]"),
        ((), {"when": timezone.now()}, "when"),
        ((b"\xff",), {}, "args[0]"),
    ],
)
def test_non_json_argument_is_named_and_nothing_is_written(
    args: tuple[object, ...], kwargs: dict[str, object], named: str
) -> None:
    with pytest.raises(InvalidPayload, match=re.escape(f"argument {named!r} is not JSON")):
        tasks.echo.enqueue(*args, **kwargs)
    assert isinstance(InvalidPayload("x"), TypeError)  # what ImmediateBackend raises too
    assert not Job.objects.exists()


def test_non_json_argument_raises_what_djangos_own_check_raises() -> None:
    """Django's tests/tasks test_enqueue_with_invalid_argument and its async twin: a
    TypeError with Django's words in it, here with our argument and path too."""
    now = dt.datetime.now()
    with pytest.raises(TypeError) as django_raised:
        tasks.echo.using(backend="immediate").enqueue(now)
    with pytest.raises(TypeError, match="Unsupported type") as ours:
        tasks.echo.enqueue(now)
    assert str(django_raised.value) in str(ours.value)
    assert "argument 'args[0]'" in str(ours.value)
    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(tasks.echo.aenqueue)(now)
    with pytest.raises(InvalidPayload, match=re.escape("<class 'set'> at key['when'][1]")):
        tasks.echo.enqueue(key={"when": [1, {2}]})
    with pytest.raises(ValueError, match=re.escape("Unsupported value: <class 'bytes'> at b[0]")):
        tasks.echo.enqueue(b=[b"\xff"])
    assert not Job.objects.exists()


def test_arguments_are_normalised_as_djangos_own_check_does() -> None:
    """UTF-8 bytes become text and tuples lists, as on Django's own backends."""
    immediate = tasks.echo.using(backend="immediate").enqueue(b"abc", pair=(1, b"d"))
    ours = tasks.echo.enqueue(b"abc", pair=(1, b"d"))
    assert ours.args == immediate.args == ["abc"]
    assert ours.kwargs == immediate.kwargs == {"pair": [1, "d"]}
    assert Job.objects.get().payload["args"] == ["abc"]


def test_arguments_that_do_not_fit_the_function_are_refused_at_enqueue() -> None:
    with pytest.raises(InvalidArguments, match=r"tasks\.add\(.*missing a required argument: 'b'"):
        tasks.add.enqueue(1)
    with pytest.raises(InvalidArguments):
        tasks.add.enqueue(1, 2, c=3)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "result_id",
    ["", "not-a-uuid", str(uuid.uuid4()), "0" * 65, "0" * 32 + "x"],
    # Named, not shown: a random id would differ between pytest-xdist's workers.
    ids=["empty", "not-a-uuid", "unknown-uuid", "65-digits", "not-hex"],
)
def test_unknown_or_malformed_id_does_not_exist(result_id: str) -> None:
    tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(result_id)
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result_id)


def test_a_job_that_is_not_a_django_task_does_not_exist_as_a_result() -> None:
    handle = enqueue(own_tasks.add, 1, 2)
    with pytest.raises(TaskResultDoesNotExist, match="not a Django task"):
        task_backends["default"].get_result(str(handle.id))


def test_result_of_another_task_is_a_mismatch() -> None:
    result = tasks.echo.enqueue(1)
    with pytest.raises(TaskResultMismatch):
        tasks.add.get_result(result.id)


# --- results ----------------------------------------------------------------------------


def test_enqueue_returns_a_ready_result_whose_id_finds_the_job() -> None:
    result = tasks.add.using(priority=7).enqueue(2, 3)
    job = Job.objects.get()
    assert result.id == str(job.id)
    assert isinstance(result.id, str)
    assert len(result.id) < 64
    assert result.status == "READY"
    assert result.enqueued_at == job.created_at
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None, None, None)
    assert result.errors == []
    assert result.worker_ids == []
    assert result.backend == "default"
    assert result.args == [2, 3]
    assert result.kwargs == {}
    assert job.payload["args"] == [2, 3]
    assert job.kind == "tests.djtasks.tasks.add"


@pytest.mark.django_db(transaction=True)
def test_get_result_gives_back_the_same_task_object() -> None:
    result = tasks.add.enqueue(2, 3)
    run_burst()
    fetched = tasks.add.get_result(result.id)
    assert fetched.task is tasks.add
    assert fetched.status == "SUCCESSFUL"
    assert fetched.return_value == 5
    # A task enqueued with other options comes back with them, around the same function.
    other = tasks.add.using(priority=-5, queue_name="reports").enqueue(1, 1)
    fetched = tasks.add.get_result(other.id)
    assert fetched.task.func is tasks.add.func
    assert (fetched.task.priority, fetched.task.queue_name) == (-5, "reports")


@pytest.mark.django_db(transaction=True)
def test_running_result_names_its_worker_and_start() -> None:
    result = tasks.slow_first_attempt.enqueue(seconds=3)
    worker = WorkerThread(concurrency=1, worker_id="busy-worker").start()
    try:
        running = wait_for(
            lambda: (r := tasks.slow_first_attempt.get_result(result.id)).status == "RUNNING" and r
        )
        assert running.worker_ids == ["busy-worker"]
        assert running.started_at is not None
        assert running.started_at == running.last_attempted_at
        assert running.started_at <= timezone.now()
        assert running.finished_at is None
        wait_for(lambda: tasks.slow_first_attempt.get_result(result.id).is_finished, timeout=20)
    finally:
        worker.stop()
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.return_value["attempt"] == 1


def test_enqueue_inside_a_rolled_back_transaction_leaves_nothing() -> None:
    class Rollback(Exception):
        pass

    seen: list[str] = []

    def enqueue_then_fail() -> None:
        with transaction.atomic():
            result = tasks.add.enqueue(1, 2)
            seen.append(tasks.add.get_result(result.id).status)
            seen.append(result.id)
            raise Rollback

    with pytest.raises(Rollback):
        enqueue_then_fail()
    status, result_id = seen
    assert status == "READY"
    assert not Job.objects.exists()
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result_id)


@pytest.mark.django_db(transaction=True)
def test_aenqueue_and_aget_result() -> None:
    async def scenario() -> str:
        result = await tasks.async_add.aenqueue(1, 2)
        fetched = await tasks.async_add.aget_result(result.id)
        assert fetched.status == "READY"
        return result.id

    result_id = async_to_sync(scenario)()
    run_burst()

    async def finished() -> int:
        result = await tasks.async_add.aget_result(result_id)
        await result.arefresh()
        return result.return_value

    assert async_to_sync(finished)() == 3


# --- operators --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_cancel_requeue_and_stats_work_on_django_tasks() -> None:
    result = tasks.add.enqueue(20, 22)
    assert [(p.kind, p.queue, p.count) for p in stats().pending] == [
        ("tests.djtasks.tasks.add", "default", 1)
    ]
    cancel(result.id, actor="ops")
    result.refresh()
    assert result.status == "FAILED"
    assert result.errors == []
    assert result.finished_at is not None
    requeue(result.id, actor="ops")
    result.refresh()
    assert result.status == "READY"
    assert result.finished_at is None
    run_burst()
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.return_value == 42
    assert result.attempts == 1
    assert stats().runs["tests.djtasks.tasks.add"].outcomes == {"completed": 1}


@pytest.mark.django_db(transaction=True)
def test_failed_django_task_is_dead_and_requeue_runs_it_again() -> None:
    result = tasks.fail.enqueue("once")
    run_burst()
    assert stats().dead == {"tests.djtasks.tasks.fail": 1}
    requeue(result.id)
    run_burst()
    result.refresh()
    assert result.status == "FAILED"
    assert result.attempts == 2
    assert [e.exception_class for e in result.errors] == [ValueError, ValueError]
