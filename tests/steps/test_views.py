"""Operators see where a job is: the job page lists its steps (results redacted) and
its sleep's wake time or the event it waits for, the changelist filters parked jobs,
``jobqueue show`` prints the same, and the dashboard and ``stats()`` count sleeping and
waiting jobs apart from pending ones."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.testing import run_jobs
from tests.admin.conftest import make_user
from tests.taskapp import steps_tasks, tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"


def viewer() -> Client:
    from django.contrib.auth.models import User

    user = User.objects.filter(username="vic").first()
    client = Client()
    client.force_login(user or make_user("vic", ["view_job", "view_journalentry"]))
    return client


def show(job_id: object) -> str:
    out = StringIO()
    call_command("jobqueue", "show", str(job_id), stdout=out)
    return out.getvalue()


def test_the_job_page_and_show_list_the_steps_and_the_sleep_s_wake_time() -> None:
    handle = steps_tasks.sleeper.enqueue(3600)
    run_jobs()
    page = viewer().get(f"{JOBS}{handle.id}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="job-steps"' in text
    assert [r["name"] for r in page.context["steps"]] == ["before", "sleep 1"]
    assert page.context["parked"].startswith("sleeping until ")
    assert 'id="job-parked"' in text
    printed = show(handle.id)
    assert "sleeping until" in printed
    assert "step before" in printed
    assert 'result: "before"' in printed
    assert "sleep sleep 1" not in printed
    assert re.search(r"^sleep 1: +run 1 at .*, until: ", printed, re.M), printed


def test_a_step_result_is_redacted_on_the_job_page_and_in_show() -> None:
    handle = steps_tasks.waiter.enqueue("secrets", "k")
    run_jobs()
    from django_jobqueue import emit

    emit("secrets", key="k", payload={"password": "hunter2", "ok": 1})
    run_jobs()
    page = viewer().get(f"{JOBS}{handle.id}/change/")
    text = page.content.decode()
    assert "hunter2" not in text
    assert "hunter2" not in show(handle.id)
    assert [r["kind"] for r in page.context["steps"]] == ["wait", "step"]


def test_a_waiting_job_shows_its_event_and_the_changelist_filters_parked_jobs() -> None:
    waiting = steps_tasks.waiter.enqueue("survey", "u-1", timeout=600)
    sleeping = steps_tasks.sleeper.enqueue(3600)
    plain = tasks.add.enqueue(1, 2)
    run_jobs(kinds=[steps_tasks.waiter, steps_tasks.sleeper])
    page = viewer().get(f"{JOBS}{waiting.id}/change/")
    assert page.context["parked"].startswith("waiting for event 'survey' key 'u-1' until ")
    assert "waiting for event 'survey' key 'u-1' until" in show(waiting.id)
    client = viewer()
    for value, expected in (("event", {waiting.id}), ("sleep", {sleeping.id})):
        listed = client.get(f"{JOBS}?parked={value}")
        assert listed.status_code == 200
        assert {j.id for j in listed.context["cl"].result_list} == expected
    everything = client.get(JOBS)
    assert plain.id in {j.id for j in everything.context["cl"].result_list}


def test_the_dashboard_and_stats_count_sleeping_and_waiting_apart_from_pending() -> None:
    steps_tasks.sleeper.enqueue(3600)
    steps_tasks.waiter.enqueue("a", "1")
    steps_tasks.waiter.enqueue("a", "2", timeout=60)
    run_jobs()
    tasks.add.enqueue(1, 2)
    s = store.stats(now=timezone.now())
    assert (s.pending_total, s.scheduled, s.sleeping, s.waiting_for_events) == (1, 0, 1, 2)
    page = viewer().get(f"{JOBS}dashboard/")
    cards = {label: value for label, value, *_ in page.context["cards"]}
    assert (cards["pending now"], cards["scheduled"]) == ("1", "0")
    assert (cards["sleeping"], cards["waiting for events"]) == ("1", "2")
    out = StringIO()
    call_command("jobqueue", "stats", stdout=out)
    assert "sleeping 1   waiting for events 2" in out.getvalue()


def test_a_parked_job_s_badge_says_sleeping_or_waiting_for_event_not_scheduled() -> None:
    sleeping = steps_tasks.sleeper.enqueue(3600)
    waiting = steps_tasks.waiter.enqueue("shipped", "order-7")
    run_jobs()
    client = viewer()
    badge = r'<span class="jq-badge" style="background:[^"]+">{}</span>'
    for handle, word in ((sleeping, "sleeping"), (waiting, "waiting for event")):
        page = client.get(f"{JOBS}{handle.id}/change/").content.decode()
        assert re.search(badge.format(word), page), word
        assert not re.search(badge.format("scheduled"), page)
    listing = client.get(JOBS).content.decode()
    assert re.search(badge.format("sleeping"), listing)
    assert re.search(badge.format("waiting for event"), listing)
    assert not re.search(badge.format("scheduled"), listing)
