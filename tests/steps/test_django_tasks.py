"""Durable steps in a Django task on this queue's backend: its context has ``step``,
``sleep`` and ``wait_for``; a task that sleeps or waits reads ``READY`` (never
``FAILED``), and finishes ``SUCCESSFUL`` with what its steps recorded."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import emit, job
from django_jobqueue.backend.compat import TaskResultStatus, task_backends
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.djtasks import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_a_django_task_that_sleeps_and_waits_is_ready_not_failed_and_then_succeeds() -> None:
    result = tasks.onboard_steps.enqueue(user="ada")
    run_jobs()
    backend = task_backends["default"]
    asleep = backend.get_result(result.id)
    assert asleep.status == TaskResultStatus.READY
    assert asleep.errors == []
    assert Job.objects.get(id=result.id).parked == "sleep"

    run_jobs(now=timezone.now() + timedelta(hours=1, minutes=1))
    waiting = backend.get_result(result.id)
    assert waiting.status == TaskResultStatus.READY
    assert Job.objects.get(id=result.id).parked == "event"

    assert emit("answered", key="ada", payload="yes") == 1
    run_jobs()
    done = backend.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"greeted": "ADA", "answer": "yes"}
    assert done.errors == []


def test_a_django_task_whose_replay_diverges_fails_at_once_with_step_divergence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = len(tasks.BACKOFF_CALLS)
    result = tasks.diverging.enqueue()
    run_jobs()
    monkeypatch.setattr(tasks, "DIVERGING_PLAN", ["a", "c", "b"])
    run_jobs(now=timezone.now() + timedelta(hours=1, minutes=1))
    failed = task_backends["default"].get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    [error] = failed.errors
    assert error.exception_class_path == "django_jobqueue.errors.StepDivergence"
    assert Job.objects.get(id=result.id).status == "dead"
    assert len(tasks.BACKOFF_CALLS) == asked  # not asked: a divergence is never retried


def test_a_django_task_patches_and_streams_through_its_context() -> None:
    result = tasks.streams_and_patches.enqueue(user="ada")
    run_jobs()
    done = task_backends["default"].get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"greeted": "ADA", "patched": True}
    assert [item.value for item in job(result.id).stream(timeout=0)] == [{"greeting": "ada"}]


def test_an_async_django_task_sleeps_and_waits_through_its_contexts_twins() -> None:
    result = tasks.async_onboard.enqueue(user="ada")
    run_jobs()
    backend = task_backends["default"]
    assert backend.get_result(result.id).status == TaskResultStatus.READY
    assert Job.objects.get(id=result.id).parked == "sleep"

    run_jobs(now=timezone.now() + timedelta(hours=1, minutes=1))
    assert Job.objects.get(id=result.id).parked == "event"
    assert emit("answered", key="ada", payload="yes") == 1
    run_jobs()
    done = backend.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == {"greeted": "ADA", "answer": "yes"}
