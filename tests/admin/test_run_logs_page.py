"""The job page's Logs section (issue 34, item 5): each kept run's lines, newest run
first, a message escaped and redacted, the lines dropped between head and tail counted;
no section for a job with none."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone

from django_jobqueue.testing import run_jobs
from tests.taskapp import logging_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"


def test_the_job_page_shows_each_runs_lines_newest_first_redacted_and_escaped(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = logging_tasks.chatty.enqueue(lines=1, fail=True, secret="<b>s3cr3t</b>")
    run_jobs(kinds=[logging_tasks.chatty], now=timezone.now() + timedelta(days=1))
    page = client_for(viewer).get(f"{JOBS}{handle.id}/change/").content.decode()
    assert page.index('id="job-logs-run-3" open') < page.index('id="job-logs-run-2"')
    assert page.index('id="job-logs-run-2"') < page.index('id="job-logs-run-1"')
    assert f"run 2 line 0 of job {handle.id}" in page
    assert "Run 3: 3 lines" in page
    assert "s3cr3t" not in page
    assert "calling the API with token=********" in page
    assert 'class="jq-log-line jq-log-warn"' in page


def test_the_lines_dropped_between_the_first_and_the_last_are_counted(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    from django.conf import settings

    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "RUN_LOGS_MAX_LINES": 2}):
        handle = logging_tasks.chatty.enqueue(lines=5)
        run_jobs(kinds=[logging_tasks.chatty])
    page = client_for(viewer).get(f"{JOBS}{handle.id}/change/").content.decode()
    assert "Run 1: 2 lines, 4 dropped between the first and the last" in page


def test_a_job_that_kept_no_lines_has_no_logs_section(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = logging_tasks.chatty.enqueue(lines=1)
    page = client_for(viewer).get(f"{JOBS}{handle.id}/change/").content.decode()
    assert 'id="job-logs"' not in page
