"""The admin shows a running job's live progress as a small bar (the jobs list, under
its status; the job page, a line of its own) and the job page its trace id."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.admin.conftest import set_state
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BAR = re.compile(r'<progress value="(\S+)" max="(\S+)"></progress>')


def running(**progress: object) -> str:
    handle = tasks.add.enqueue(1, 2)
    lease = {"claimed_by": "w:1", "claim_expires_at": timezone.now() + timedelta(minutes=1)}
    set_state(handle.id, status="claimed", run_count=1, **lease, **progress)
    return str(handle.id)


def test_the_jobs_list_shows_a_bar_for_a_running_job_that_reported_progress(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    running(progress_done=30, progress_total=120, progress_note="<b>invoices</b>")
    running()  # running, nothing reported: no bar
    finished = tasks.add.enqueue(2, 2)
    set_state(finished.id, status="completed", progress_done=5, progress_total=5)
    text = client_for(viewer).get(JOBS).content.decode()
    assert BAR.findall(text) == [("30", "120")]  # one bar: the finished job shows none
    assert "25%" in text
    assert "&lt;b&gt;invoices&lt;/b&gt;" in text  # the task's note, escaped
    assert "<b>invoices</b>" not in text


def test_a_count_with_no_total_is_an_indeterminate_bar_and_its_count(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    job_id = running(progress_done=1234.5)
    page = client_for(viewer).get(f"{JOBS}{job_id}/change/").content.decode()
    assert "<progress></progress>" in page
    assert "1234.5" in page


def test_the_job_page_shows_progress_and_the_trace_id(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    job_id = running(
        progress_done=3,
        progress_total=4,
        progress_note="almost",
        trace_context='{"traceparent":"' + TRACEPARENT + '"}',
    )
    page = client_for(viewer).get(f"{JOBS}{job_id}/change/").content.decode()
    assert BAR.findall(page) == [("3", "4")]  # once, on its own line
    assert "75%" in page
    assert "almost" in page
    assert "<code>4bf92f3577b34da6a3ce929d0e0e4736</code>" in page


def test_a_stored_trace_context_that_cannot_be_read_shows_no_trace_id(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    job_id = running(trace_context="{not json")
    page = client_for(viewer).get(f"{JOBS}{job_id}/change/")
    assert page.status_code == 200
    assert "trace id" not in page.content.decode()


def test_a_job_that_is_not_running_shows_no_progress_on_its_page_or_in_show(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    """A row left with a partial value (settled before settlements cleared it) shows
    none once the job is not running: no 66 % bar beside a green "completed"."""
    from io import StringIO

    from django.core.management import call_command

    finished = tasks.add.enqueue(2, 2)
    set_state(finished.id, status="completed", progress_done=2, progress_total=3)
    page = client_for(viewer).get(f"{JOBS}{finished.id}/change/").content.decode()
    assert not BAR.search(page)
    assert "66%" not in page
    out = StringIO()
    call_command("jobqueue", "show", str(finished.id), stdout=out)
    assert "progress" not in out.getvalue()
    from django_jobqueue import job

    assert job(finished.id).progress is None  # the API says the same
    job_id = running(progress_done=2, progress_total=3)
    out = StringIO()
    call_command("jobqueue", "show", job_id, stdout=out)
    assert re.search(r"^progress: +2/3 \(66%\)$", out.getvalue(), re.M)
