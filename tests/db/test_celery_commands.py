"""The Celery surface's schedules and commands on a database: a ``beat_schedule``
registered as periodic schedules, ``jobqueue celery-check``, ``jobqueue
import-celery-beat`` (``django_celery_beat`` needs Celery itself, so its rows are
given here as the dicts the command reads from them), and an ``update_state`` seen
through ``AsyncResult``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue.contrib.celery import AsyncResult, Celery, chain, crontab, states
from django_jobqueue.contrib.celery.app import current_app
from django_jobqueue.contrib.celery.beat import periodic_setting, register_beat
from django_jobqueue.contrib.celery.exceptions import TaskRevokedError, Unsupported
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.celeryapp import celery_app, tasks
from tests.helpers import manage_in_process

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_a_beat_schedule_becomes_periodic_schedules_with_their_arguments() -> None:
    with registry.isolated():
        made = register_beat(
            {
                "add-every-30-seconds": {
                    "task": "tests.celeryapp.tasks.add",
                    "schedule": 30.0,
                    "args": (16, 16),
                },
                "mul-mondays": {
                    "task": "tests.celeryapp.tasks.mul",
                    "schedule": crontab(hour=7, minute=30, day_of_week=1),
                    "kwargs": {"x": 2, "y": 3},
                },
            }
        )
        assert [(s.name, s.expression) for s in made] == [
            ("add-every-30-seconds", "* * * * * */30"),
            ("mul-mondays", "30 7 * * 1"),
        ]
        assert made[0].payload() == {"args": [16, 16], "kwargs": {}}
        with pytest.raises(Unsupported, match="'odd'"):
            register_beat({"odd": {"task": "tests.celeryapp.tasks.add", "schedule": 7 * 60}})


def test_an_app_registers_its_beat_schedule_when_made_after_start_up() -> None:
    with registry.isolated():
        app = Celery("beat", set_as_current=False)
        app.conf.beat_schedule = {
            "count": {"task": "tests.celeryapp.tasks.count_widgets", "schedule": timedelta(hours=1)}
        }
        app.finalize()
        assert any(s.name == "count" for s in registry.schedules())


def test_django_celery_beat_rows_map_to_the_periodic_setting_or_are_named() -> None:
    entries, refused = periodic_setting(
        [
            {"name": "nightly", "task": "proj.tasks.report", "args": "[1]", "kwargs": "{}",
             "crontab": {"minute": "0", "hour": "3", "day_of_week": "*", "day_of_month": "*",
                         "month_of_year": "*", "timezone": "Europe/Paris"}},
            {"name": "often", "task": "proj.tasks.poll", "args": "[]", "kwargs": '{"a": 1}',
             "interval": {"every": 10, "period": "minutes"}},
            {"name": "sunrise", "task": "proj.tasks.wake", "args": "[]", "kwargs": "{}"},
        ]
    )  # fmt: skip
    assert entries == [
        {"name": "nightly", "kind": "proj.tasks.report", "cron": "0 3 * * *", "args": [1],
         "kwargs": {}, "timezone": "Europe/Paris"},
        {"name": "often", "kind": "proj.tasks.poll", "cron": "*/10 * * * *", "args": [],
         "kwargs": {"a": 1}},
    ]  # fmt: skip
    assert len(refused) == 1
    assert "'sunrise'" in refused[0]


def test_import_celery_beat_without_django_celery_beat_says_so() -> None:
    ran = manage_in_process("jobqueue", "import-celery-beat")
    assert ran.returncode == 1
    assert "django_celery_beat is not installed" in ran.stderr


@contextmanager
def current_app_kept() -> Iterator[None]:
    """A new app is the current one, as in Celery, and shared tasks (tests.celeryapp's)
    follow the current app: without this, every later test in the process would read
    the test's app's configuration."""
    before = current_app()
    try:
        yield
    finally:
        before.set_current()


def test_celery_check_lists_the_tasks_and_what_differs() -> None:
    with registry.isolated(), current_app_kept():
        tasks_app = Celery("checked")  # current until the test ends (celery-check reads it)
        tasks_app.conf.broker_url = "redis://"
        tasks_app.conf.task_time_limit = 30
        tasks_app.conf.worker_colour = "red"

        @tasks_app.task(time_limit=5, rate_limit="10/m")
        def limited() -> None:
            return None

        ran = manage_in_process("jobqueue", "celery-check")
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert any("tests.celeryapp.tasks.add" in line and "maps" in line for line in lines)
    assert any("limited" in line and "--pool process" in line for line in lines)
    assert any("limited" in line and "all workers" in line for line in lines)
    assert any(line.startswith("broker_url") and "differs" in line for line in lines)
    assert any(line.startswith("worker_colour") and "unsupported" in line for line in lines)


def test_update_state_is_the_runs_progress_its_state_the_note() -> None:
    result = tasks.report_progress.delay(10)
    assert result.state == states.PENDING
    assert result.args == [10]
    run_jobs()
    assert result.get(timeout=5) == [5, 10, "PROGRESS"]
    assert result.state == states.SUCCESS
    # While it runs, a job whose progress names a state shows that state.
    assert states.of_job("claimed", 0, "PROGRESS") == "PROGRESS"
    assert states.of_job("claimed", 0, "") == states.STARTED
    assert states.of_job("pending", 1) == states.RETRY


def test_a_canvas_options_reach_each_of_its_jobs_and_leave_the_signatures_as_they_were() -> None:
    first = tasks.add.s(1, 1)
    result = chain(first, tasks.mul.s(2).set(queue="own")).apply_async(queue="io", countdown=60)
    assert first.options == {}
    parent = result.parent
    assert parent is not None
    assert Job.objects.get(id=parent.id).queue == "io"
    assert Job.objects.get(id=result.id).queue == "own"  # its own option wins
    assert run_jobs() == []  # both 60 s away
    run_jobs(now=timezone.now() + timedelta(seconds=61))
    assert result.get(timeout=5) == 4


def test_revoke_cancels_and_terminate_stops_the_job_naming_the_revoke() -> None:
    plain = tasks.add.delay(1, 2)
    celery_app.control.revoke(plain.id)
    assert plain.state == states.REVOKED
    with pytest.raises(TaskRevokedError):
        plain.get(timeout=5)
    hard = tasks.add.delay(3, 4)
    hard.revoke(terminate=True)  # handle.terminate(): a pending job is cancelled at once
    assert hard.state == states.REVOKED
    [entry] = JournalEntry.objects.filter(job_id=hard.id)
    assert "celery revoke" in entry.note
    celery_app.control.revoke(str(hard.id))  # already finished: nothing to do
    assert AsyncResult("00000000-0000-0000-0000-000000000000").state == states.PENDING
