"""A task no worker will have, enqueued with ``DEBUG`` on: said once, at the enqueue.

A task registered after Django was set up (in a view, a shell, a module no app's
``tasks.py`` imports) enqueues fine and then waits forever, since every worker imports
only the apps' tasks modules. With ``DEBUG`` on, the first enqueue of such a kind logs
a warning naming it; a task of an app's ``tasks.py`` never does.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from django_jobqueue import task
from django_jobqueue.models import Job
from django_jobqueue.task.registry import registry
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "django_jobqueue" and r.levelname == "WARNING"
    ]


def test_a_task_no_worker_has_is_said_once_when_enqueued_with_debug_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Registered in the test, long after Django was set up; isolated, so that the other
    # tests' checks (W006) never see it.
    with registry.isolated():

        @task(kind="tests.defined_outside_tasks_py")
        def defined_here(n: int) -> int:
            return n

        with override_settings(DEBUG=True), caplog.at_level("WARNING", logger="django_jobqueue"):
            defined_here.enqueue(n=1)
            defined_here.enqueue(n=2)
    [said] = _warnings(caplog)
    assert "'tests.defined_outside_tasks_py'" in said
    assert "test_unseen_task." in said
    assert "workers will not have it" in said
    assert Job.objects.filter(kind="tests.defined_outside_tasks_py").count() == 2, "enqueued"


def test_an_app_task_or_debug_off_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="django_jobqueue"):
        with override_settings(DEBUG=True):
            tasks.add.enqueue(a=1, b=2)
        with override_settings(DEBUG=False):
            tasks.add.enqueue(a=1, b=2)
    assert _warnings(caplog) == []
