"""The dashboard's Schedules section: each periodic schedule with its cron, time zone,
next run, last tick and that tick's job (linked while it exists); and a bad PERIODIC
setting shown instead of breaking the page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings

from django_jobqueue import periodic, store, task
from django_jobqueue.models import Job
from django_jobqueue.task.registry import Registry

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

DASHBOARD = "/admin/django_jobqueue/job/dashboard/"
TICK = datetime(2026, 3, 2, 3, 0, tzinfo=UTC)


def test_the_dashboard_lists_each_schedule_with_next_run_and_last_job(
    task_registry: Registry, viewer: User, client_for: Callable[..., Client]
) -> None:
    @task(kind="reports.nightly")
    def nightly(full: bool = False) -> None:
        return None

    @task(kind="reports.hourly", cron="0 * * * *")
    def hourly() -> None:
        return None

    schedule = periodic(
        nightly, "0 3 * * *", kwargs={"full": True}, timezone="Europe/Paris", catch_up=True
    )
    done = store.record_tick(name=schedule.name, tick=TICK, request=schedule.request(TICK))
    client = client_for(viewer)

    text = client.get(DASHBOARD).content.decode()
    section = text[text.index('id="schedules"') : text.index('id="kinds"')]
    assert 'data-schedule="reports.hourly"' in section
    assert 'data-schedule="reports.nightly"' in section
    assert "<code>0 3 * * *</code> <small>(catch up)</small>" in section
    assert "Europe/Paris" in section
    assert f'href="/admin/django_jobqueue/job/{done.job_id}/change/"' in section
    assert ">pending</span>" in section
    assert "2026-03-02" in section  # the last tick
    assert "(in " in section  # the next run, and how soon

    # Cleaned up since: the id is still shown, no longer linked.
    Job.objects.filter(id=done.job_id).delete()
    section = client.get(DASHBOARD).content.decode()
    assert f"{done.job_id} " in section
    assert f"/job/{done.job_id}/change/" not in section
    assert ">removed</span>" in section


def test_the_dashboard_says_when_there_are_no_schedules_or_the_setting_is_wrong(
    task_registry: Registry, viewer: User, client_for: Callable[..., Client]
) -> None:
    client = client_for(viewer)
    assert "No periodic schedules." in client.get(DASHBOARD).content.decode()
    with override_settings(JOBQUEUE={"PERIODIC": [{"kind": "no.such", "cron": "@daily"}]}):
        page = client.get(DASHBOARD)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="schedules-error"' in text
    assert "PERIODIC[0] (&#x27;no.such&#x27;): No task is registered" in text
