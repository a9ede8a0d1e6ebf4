"""The shared suite: each case runs on Django's ImmediateBackend and on JobQueueBackend
(drained by a burst worker) and must come out the same: status, return value, args,
kwargs, the errors' exception classes, attempts and the signals sent."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone

from django_jobqueue import Priority
from django_jobqueue.backend import JobQueueBackend
from django_jobqueue.backend.compat import InvalidTask, Task, task_backends
from django_jobqueue.models import Job
from tests.djtasks import tasks
from tests.djtasks.suite import capture_signals, summary
from tests.helpers import run_burst

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


CASES: dict[str, tuple[Task, tuple[Any, ...], dict[str, Any]]] = {
    "plain": (tasks.add, (2, 3), {}),
    "args and kwargs": (tasks.echo, (1, "two", [3.5, None]), {"key": {"nested": [True]}}),
    "tuple arguments become lists": (tasks.echo, ((1, 2),), {"pair": (3, 4)}),
    "async": (tasks.async_add, (20, 22), {}),
    "takes_context": (tasks.attempt_info, (), {"label": "first"}),
    "failing": (tasks.fail, ("boom",), {}),
    "non-JSON return value": (tasks.unserialisable, (), {}),
    "its own queue": (tasks.send_mail, ("ada@example.com",), {}),
}


def run_on_both(
    task: Task, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The case on ImmediateBackend and on ours: (immediate, ours), signals included.
    Ours sends every signal with JobQueueBackend as the sender."""
    with capture_signals() as signals:
        immediate = task.using(backend="immediate").enqueue(*args, **kwargs)
        ours = task.enqueue(*args, **kwargs)
        assert ours.status == "READY"
        run_burst()
        ours.refresh()
    assert signals.senders(ours.id) == {JobQueueBackend}
    return (
        {**summary(immediate), "signals": signals.of(immediate.id)},
        {**summary(ours), "signals": signals.of(ours.id)},
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(CASES))
def test_shared_suite_case_ends_the_same_on_both_backends(case: str) -> None:
    task, args, kwargs = CASES[case]
    immediate, ours = run_on_both(task, args, kwargs)
    assert ours == immediate
    assert len(immediate["signals"]) == 3  # enqueued, started, finished


@pytest.mark.django_db(transaction=True)
def test_shared_suite_failure_signals_carry_the_exception_being_handled() -> None:
    immediate, ours = run_on_both(tasks.fail, ("boom",), {})
    assert (
        ours["signals"]
        == immediate["signals"]
        == [
            ("enqueued", "READY", None),
            ("started", "RUNNING", None),
            ("finished", "FAILED", ValueError),
        ]
    )
    assert immediate["errors"] == [ValueError]


@pytest.mark.django_db(transaction=True)
def test_shared_suite_non_json_return_value_fails_with_type_error() -> None:
    immediate, ours = run_on_both(tasks.unserialisable, (), {})
    assert ours["status"] == immediate["status"] == "FAILED"
    assert ours["errors"] == immediate["errors"] == [TypeError]
    [entry] = Job.objects.get().journal.all()
    assert "tests.djtasks.tasks.unserialisable returned a object" in entry.note
    assert "not JSON-serialisable" in entry.note


@pytest.mark.django_db(transaction=True)
def test_shared_suite_takes_context_sees_attempt_one_and_running() -> None:
    immediate, ours = run_on_both(tasks.attempt_info, (), {"label": "x"})
    assert (
        ours["return_value"]
        == immediate["return_value"]
        == {
            "label": "x",
            "attempt": 1,
            "status": "RUNNING",
            "started": True,
            "args": [],
        }
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("priority", "tier"), [(100, Priority.HIGH), (-100, Priority.LOW), (0, Priority.NORMAL)]
)
def test_shared_suite_priority_extremes(priority: int, tier: int) -> None:
    immediate, ours = run_on_both(tasks.add.using(priority=priority), (1, 1), {})
    assert ours == immediate
    assert ours["priority"] == priority
    assert Job.objects.get().priority == tier


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("queue", settings.TASK_QUEUES)
def test_shared_suite_each_queue(queue: str) -> None:
    immediate, ours = run_on_both(tasks.add.using(queue_name=queue), (1, 2), {})
    assert ours == immediate
    assert ours["queue_name"] == queue
    assert Job.objects.get().queue == queue


def test_shared_suite_unknown_queue_is_rejected_by_both_before_enqueue() -> None:
    for backend in ("immediate", "default"):
        with pytest.raises(InvalidTask, match="Queue 'nowhere' is not valid for backend"):
            tasks.add.using(backend=backend, queue_name="nowhere")
    # A task another backend accepts is still checked by ours at enqueue: nothing written.
    elsewhere = tasks.add.using(backend="immediate", queue_name="elsewhere")
    with pytest.raises(InvalidTask, match="Queue 'elsewhere' is not valid for backend"):
        task_backends["default"].enqueue(elsewhere, [1, 2], {})
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_shared_suite_run_after_in_the_future_waits_then_ends_like_immediate() -> None:
    # ImmediateBackend cannot defer (supports_defer is False): it is compared with the
    # same call run at once, and ours must not run before run_after.
    assert task_backends["immediate"].supports_defer is False
    later = timezone.now() + timedelta(seconds=2)
    with capture_signals() as signals:
        immediate = tasks.add.using(backend="immediate").enqueue(4, 5)
        ours = tasks.add.using(run_after=later).enqueue(4, 5)
        run_burst()
        ours.refresh()
        assert ours.status == "READY"
        assert ours.started_at is None
        assert ours.task.run_after == later
        assert Job.objects.get().visible_at == later
        time.sleep(max((later - timezone.now()).total_seconds(), 0) + 0.05)
        run_burst()
        ours.refresh()
    assert summary(ours) == summary(immediate)
    assert signals.of(ours.id) == signals.of(immediate.id)
    assert ours.started_at is not None
    assert ours.started_at >= later
