"""The on-call hour's list and failure fixes in headless Chromium at 1,280 px with the
sidebar open: the jobs list fits with a running job reporting progress (a real worker
writing it), kind names unbroken mid-word; a deep ORM failure's page shows the task's
own frame without a click; a chord larger than the graph's read draws its callback and
its members' summary bar in colour.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import Status, cancel, job
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.browser.test_admin_flows import login
from tests.browser.test_admin_why import WIDTH, fits, seed, under_srv
from tests.helpers import WorkerThread, postgres_only, wait_for
from tests.taskapp import steps_tasks, tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]


# Each text node's line boxes: more than one is a name wrapped inside itself.
LINES = """els => els.map(e => {
  const r = document.createRange(); r.selectNodeContents(e);
  const tops = new Set([...r.getClientRects()].map(b => Math.round(b.top)));
  return [e.textContent, tops.size];
})"""


def test_the_jobs_list_fits_at_1280_px_with_a_running_job_reporting_progress(
    page: Any, live_server: Any, screenshots: Path, settings: Any
) -> None:
    seed(settings)
    steps_tasks.sleeper.enqueue(3600)  # parked: the widest badges
    steps_tasks.waiter.enqueue("shipped", "order-7")
    run_jobs(kinds=[steps_tasks.sleeper, steps_tasks.waiter])
    worker = WorkerThread(kinds=[tasks.reports_progress.kind], worker_id="app-3:77").start()
    try:
        handle = tasks.reports_progress.enqueue(steps=400, step_seconds=0.25)
        wait_for(lambda: job(handle.id).progress is not None, timeout=30)
        base = live_server.url
        login(page, base)
        page.goto(f"{base}/admin/django_jobqueue/job/")
        row = page.locator(f"tr:has(a[href*='{handle.id}'])")
        assert row.locator("td.field-status_badge progress").count() == 1
        fits(page)
        names = page.locator("td.field-kind_name > span").evaluate_all(LINES)
        assert names
        wrapped = [name for name, lines in names if lines > 1]
        assert not wrapped, wrapped
        # The last-error column is in view, not behind a scrollbar.
        box = page.locator("#result_list thead th.column-error").bounding_box()
        assert box["x"] + box["width"] <= WIDTH
        page.screenshot(path=screenshots / "admin-jobs-progress-1280.png", full_page=True)
        cancel(handle.id)  # the task checks ctx.cancelled between its steps
        wait_for(lambda: job(handle.id).status != Status.CLAIMED, timeout=60)
    finally:
        worker.stop()
    assert job(handle.id).progress is None  # settled: no stale value


def test_a_deep_orm_failure_shows_the_tasks_frame_without_unfolding(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    failed = tasks.duplicate_user.enqueue(username="ada")
    run_jobs(kinds=[tasks.duplicate_user], now=timezone.now())
    assert Job.objects.get(id=failed.id).status == Status.DEAD
    under_srv(failed.id)
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/{failed.id}/change/")
    summary = page.locator("#last-error .jq-error-summary code").inner_text()
    assert summary.startswith("IntegrityError: duplicate key value")
    frame = page.locator("#last-error .jq-tb > div", has_text="in duplicate_user")
    assert frame.count() == 1
    assert frame.is_visible()
    assert re.search(r"tests/taskapp/tasks\.py\", line \d+, in duplicate_user", frame.inner_text())
    assert "User.objects.create(username=username)" in frame.inner_text()
    assert "library frames omitted" in frame.inner_text()
    # Nothing was opened: every fold is still closed.
    folds = page.locator("#last-error details.jq-lib")
    assert folds.count() >= 1
    assert all(f.get_attribute("open") is None for f in folds.all())
    page.screenshot(path=screenshots / "admin-job-deep-failure.png", full_page=True)


def test_a_big_chords_graph_draws_its_callback_and_coloured_summary_bars(
    page: Any, live_server: Any, screenshots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 20,000-member chord's rule, with the page's read lowered to 200 steps: the
    callback is drawn, and the members' summary bar shows its statuses' colours."""
    from django_jobqueue.admin import workflows
    from tests.admin.workflow_rows import chord

    monkeypatch.setattr(workflows, "GRAPH_READ_CAP", 200)
    wf, _ = chord("album", 300, dead=40)
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/workflow/{wf.id}/change/")
    page.wait_for_selector("#workflow-graph")
    labels = page.locator("#workflow-graph g.jq-step .jq-label").all_text_contents()
    assert labels == ["callback"]  # the members are one summary node
    bars = page.locator("#workflow-graph g.jq-summary rect.jq-bar")
    assert bars.count() == 2  # completed and dead
    for bar in bars.all():
        drawn = bar.evaluate("e => getComputedStyle(e).fill")
        expected = bar.evaluate(
            "e => { const p = document.createElement('div');"
            " p.style.color = e.getAttribute('fill'); document.body.appendChild(p);"
            " const c = getComputedStyle(p).color; p.remove(); return c; }"
        )
        assert drawn == expected, (bar.get_attribute("data-status"), drawn, expected)
    page.screenshot(path=screenshots / "admin-workflow-big-chord.png", full_page=True)
