"""A run's own log lines on its job page, in headless Chromium at 1,280 px (issue 34,
item 5): each run's lines under its number, newest run first and open, a secret in a
line redacted, and the section as wide as the page, no wider."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import Status
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.browser.test_admin_flows import login
from tests.helpers import postgres_only
from tests.taskapp import logging_tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

WIDTH = 1280


def test_a_runs_log_lines_appear_on_its_job_page_newest_run_first(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    handle = logging_tasks.chatty.enqueue(lines=3, fail=True, secret="s3cr3t-value")
    # Three failed runs (max_failures=3): the job is dead, each run kept its lines.
    run_jobs(kinds=[logging_tasks.chatty], now=timezone.now() + timedelta(days=1))
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/{handle.id}/change/")
    section = page.locator("#job-logs")
    section.wait_for()
    runs = page.locator("#job-logs details.jq-run-log")
    assert runs.count() == 3
    assert [runs.nth(i).get_attribute("id") for i in range(3)] == [
        "job-logs-run-3",
        "job-logs-run-2",
        "job-logs-run-1",
    ]
    newest = page.locator("#job-logs-run-3")
    assert newest.get_attribute("open") is not None
    assert page.locator("#job-logs-run-1").get_attribute("open") is None
    assert "Run 3: 5 lines" in newest.locator("summary").inner_text()
    lines = newest.locator("tr.jq-log-line")
    assert lines.count() == 5
    assert f"run 3 line 0 of job {handle.id}" in lines.nth(0).inner_text()
    assert "tests.taskapp.logging_tasks" in lines.nth(0).inner_text()
    warned = newest.locator("tr.jq-log-warn")
    assert "warned in run 3" in warned.inner_text()
    text = section.inner_text()
    assert "s3cr3t-value" not in text
    assert "calling the API with token=********" in text
    # The section alone (the journal above it names this machine's paths).
    section.screenshot(path=str(screenshots / "admin-job-logs.png"))
    # An older run opens on a click, with its own lines only.
    page.locator("#job-logs-run-1 summary").click()
    older = page.locator("#job-logs-run-1 tr.jq-log-line")
    assert older.nth(0).is_visible()
    assert "run 1 line 0" in older.nth(0).inner_text()
    assert "run 3" not in page.locator("#job-logs-run-1").inner_text()
    # The section fits the page at 1,280 px: no horizontal scrolling.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH
    box = section.bounding_box()
    assert box is not None
    assert box["x"] + box["width"] <= WIDTH
