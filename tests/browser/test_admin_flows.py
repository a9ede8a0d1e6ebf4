"""The admin's main flows in headless Chromium, against a live server: log in, filter
dead jobs of a kind in a date range, read a job's journal, requeue it behind its
confirmation page, watch a worker complete it; clean up; pause a queue on the
dashboard, see a worker leave it alone, resume, see it run; open a failed workflow, see
its graph, retry its dead step, watch the workflow complete. Screenshots along the way.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from django_jobqueue import Status, Workflow, store
from django_jobqueue.models import Job
from django_jobqueue.task.registry import registry
from testproject.shop import tasks as shop
from tests.browser.conftest import messages_after
from tests.helpers import run_burst
from tests.taskapp import tasks

# PostgreSQL only: the test-client tests cover the admin on SQLite, and three browser
# runs per CI (PostgreSQL, SQLite, Django 6) would cost minutes for nothing new.
pytestmark = [pytest.mark.django_db(transaction=True)]

TICKET = "browser-ticket"
WORKER = "app-1:4242"  # the burst workers' id (a host name of the screenshots' own)


@pytest.fixture
def seeded() -> Job:
    """The example project's jobs, run to their ends, and one that dies until fixed."""
    for n in range(3):
        shop.send_receipt.enqueue(order_id=n, email=f"user{n}@example.com")
        shop.charge_card.enqueue(order_id=n, fail_times=1)
    shop.ExportOrders(pages=3).enqueue()
    shop.import_legacy.enqueue(path="orders-1999.xls")
    shop.send_receipt.using(delay=timedelta(hours=2)).enqueue(order_id=9, email="later@example.com")
    doomed = tasks.until_fixed.enqueue(ticket=TICKET)
    run_burst(worker_id=WORKER)
    # A worker that stays alive, for the dashboard (the burst ones have stopped).
    store.register_worker(
        worker_id="app-2:5151",
        host="app-2",
        pid=5151,
        queues=[],
        kinds=registry.kinds(),
        concurrency=8,
    )
    job = Job.objects.get(id=doomed.id)
    assert job.status == Status.DEAD
    return job


def login(page: Any, base: str) -> None:
    User.objects.create_superuser("olga", password="secret-pw")
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "olga")
    page.fill("#id_password", "secret-pw")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")


def test_filter_inspect_requeue_and_watch_it_complete(
    page: Any, live_server: Any, seeded: Job, screenshots: Path
) -> None:
    tasks.FIXED.discard(TICKET)
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/")
    page.screenshot(path=screenshots / "admin-changelist.png", full_page=True)

    # Dead jobs (status filter), of one kind (kind filter), created in a date range.
    page.click("#changelist-filter a:text-is('dead')")
    page.click(f"#changelist-filter a:text-is('{seeded.kind}')")
    today = timezone.localdate()
    page.fill("input[name=created_at__range__gte_0]", (today - timedelta(days=1)).isoformat())
    page.fill("input[name=created_at__range__gte_1]", "00:00:00")
    page.fill("input[name=created_at__range__lte_0]", (today + timedelta(days=1)).isoformat())
    page.fill("input[name=created_at__range__lte_1]", "00:00:00")
    page.click("#created-at-form input[type=submit]")
    page.wait_for_url(re.compile(r"created_at__range__gte_0="))
    assert "status__exact=dead" in page.url
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1
    page.screenshot(path=screenshots / "admin-changelist-filtered.png", full_page=True)

    # Its page: the journal reads prepared (paused) then dead.
    rows.first.locator("th a").click()
    page.wait_for_selector("#journal")
    outcomes = page.locator(".journal-entry td:nth-child(2)").all_inner_texts()
    assert outcomes == ["paused", "dead"]
    assert f"ticket {TICKET} is not fixed" in page.inner_text("#journal")
    page.screenshot(path=screenshots / "admin-job-dead.png", full_page=True)

    # Requeue, behind the confirmation page that says what it will do.
    tasks.FIXED.add(TICKET)
    try:
        page.click("#job-actions a:text-is('Requeue')")
        assert "Requeue will change 1 job" in page.inner_text("#summary")
        page.screenshot(path=screenshots / "admin-confirm-requeue.png", full_page=True)
        shown = messages_after(page, lambda: page.click("input[type=submit][value='Yes, requeue']"))
        assert "Requeued 1 job." in shown
        assert run_burst(worker_id=WORKER) == 1
    finally:
        tasks.FIXED.discard(TICKET)
    page.reload()
    outcomes = page.locator(".journal-entry td:nth-child(2)").all_inner_texts()
    assert outcomes[-2:] == ["requeued", "completed"]
    assert "admin:olga" in page.locator(".journal-entry").nth(2).inner_text()
    page.screenshot(path=screenshots / "admin-job.png", full_page=True)


def test_bulk_cancel_and_the_cleanup_form(
    page: Any, live_server: Any, seeded: Job, screenshots: Path
) -> None:
    base = live_server.url
    login(page, base)
    # Bulk: select every job, cancel; the confirmation counts what it skips.
    page.goto(f"{base}/admin/django_jobqueue/job/")
    page.check("#action-toggle")
    page.select_option("select[name=action]", "cancel")
    page.click("button[name=index]")
    summary = page.inner_text("#summary")
    total = Job.objects.count()
    assert f"Cancel will change 1 job and skip {total - 1}" in summary
    page.screenshot(path=screenshots / "admin-confirm-bulk.png", full_page=True)
    shown = messages_after(page, lambda: page.click("input[type=submit][value='Yes, cancel']"))
    assert "Cancelled 1 job. Skipped" in shown
    assert Job.objects.filter(status=Status.CANCELLED).count() == 1

    # Clean up: count first, then delete.
    page.click("a:text-is('Clean up')")
    later = timezone.localtime() + timedelta(minutes=1)
    page.fill("input[name=finished_before_0]", later.date().isoformat())
    page.fill("input[name=finished_before_1]", later.strftime("%H:%M:%S"))
    page.click("input[type=submit][value='Count the jobs first']")
    page.wait_for_selector("#cleanup-form .errorlist")  # the next page, not this one
    assert "Choose a moment in the past" in page.inner_text("#cleanup-form")
    # The form takes whole seconds: let the cancel's second pass, so "now" truncated to
    # the second is still after it and the cancelled job is counted.
    time.sleep(1.05)
    earlier = timezone.localtime()
    page.fill("input[name=finished_before_0]", earlier.date().isoformat())
    page.fill("input[name=finished_before_1]", earlier.strftime("%H:%M:%S"))
    page.click("input[type=submit][value='Count the jobs first']")
    page.wait_for_selector("#cleanup-count")
    finished = Job.objects.filter(status__in=["completed", "dead", "cancelled"]).count()
    assert f"{finished} finished jobs will be deleted" in page.inner_text("#cleanup-count")
    page.screenshot(path=screenshots / "admin-cleanup.png", full_page=True)
    yes = f"input[type=submit][value='Yes, delete {finished} jobs']"
    assert f"Cleaned up {finished} finished jobs" in messages_after(page, lambda: page.click(yes))
    assert Job.objects.count() == total - finished == 0  # the only pending job was cancelled


def test_pause_a_queue_on_the_dashboard_and_resume_it(
    page: Any, live_server: Any, seeded: Job, screenshots: Path
) -> None:
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/")
    page.click("#jobqueue-dashboard-link a:text-is('Dashboard')")
    # waiting workflow steps the 7th, then sleeping and waiting for events (durable steps)
    assert page.locator("#cards .jq-card").count() == 9
    assert page.locator("svg.jq-chart").count() == 2
    page.screenshot(path=screenshots / "admin-dashboard.png", full_page=True)

    page.fill("#pause-other input[name=queue]", "mail")
    assert "Queue mail paused." in messages_after(page, lambda: page.click("#pause-other button"))
    held = shop.send_receipt.using(queue="mail").enqueue(order_id=5, email="held@example.com")
    assert run_burst(worker_id=WORKER) == 0  # the worker leaves the paused queue alone
    assert Job.objects.get(id=held.id).status == Status.PENDING
    page.reload()
    row = page.locator("tr.queue-row[data-queue=mail]")
    assert "paused" in row.inner_text()
    page.screenshot(path=screenshots / "admin-dashboard-paused.png", full_page=True)

    resume = row.locator("button:text-is('Resume')")
    assert "Queue mail resumed." in messages_after(page, resume.click)
    assert run_burst(worker_id=WORKER) == 1
    assert Job.objects.get(id=held.id).status == Status.COMPLETED


WORKFLOW_TICKET = "browser-workflow-ticket"


def graph_statuses(page: Any) -> dict[str, str]:
    """Each drawn step's label and status, as the page shows them now."""
    nodes = page.locator("#workflow-graph g.jq-step")
    return {
        nodes.nth(i).locator("text.jq-label").text_content(): nodes.nth(i).get_attribute(
            "data-status"
        )
        for i in range(nodes.count())
    }


def test_open_a_workflow_see_its_graph_retry_its_dead_step_and_watch_it_complete(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    wf = Workflow("import-orders")
    fetch = wf.add(tasks.add.s(1, 2), name="fetch")
    check = wf.add(tasks.until_fixed.s(ticket=WORKFLOW_TICKET), name="check", after=[fetch])
    wf.add(tasks.add.s(3, 4), name="report", after=[check])
    handle = wf.enqueue()
    run_burst(worker_id=WORKER)  # fetch completes, check dies, report is cancelled
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/workflow/")
    page.click("#result_list tbody tr th a")
    page.wait_for_selector("#workflow-graph")
    assert "failed" in page.inner_text("#workflow-status")
    assert graph_statuses(page) == {"fetch": "completed", "check": "dead", "report": "cancelled"}
    page.screenshot(path=screenshots / "admin-workflow-failed.png", full_page=True)

    # The dead step's job page links back to its workflow and to its parent.
    page.click("#workflow-graph g.jq-step[data-status=dead] a")
    page.wait_for_selector("#job-workflow")
    assert "fetch" in page.inner_text("#job-parents")
    page.click("#job-workflow-link")
    page.wait_for_selector("#workflow-graph")

    tasks.FIXED.add(WORKFLOW_TICKET)
    try:
        page.click("#workflow-actions a:text-is('Retry dead steps')")
        yes = "input[type=submit][value='Yes, retry dead steps']"
        assert "Requeued 1 dead step" in messages_after(page, lambda: page.click(yes))
        assert graph_statuses(page)["check"] == "pending"
        assert graph_statuses(page)["report"] == "waiting"  # re-armed behind it
        assert run_burst(worker_id=WORKER) >= 2
    finally:
        tasks.FIXED.discard(WORKFLOW_TICKET)
    page.reload()
    assert graph_statuses(page) == dict.fromkeys(("fetch", "check", "report"), "completed")
    assert "completed" in page.inner_text("#workflow-status")
    assert handle.refresh().status == "completed"
    page.screenshot(path=screenshots / "admin-workflow.png", full_page=True)


def test_re_run_a_dead_job_from_its_buggy_step_on_the_steps_table(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    from tests.taskapp import steps_tasks

    ticket = "rerun-ticket"
    handle = steps_tasks.fixable.enqueue(ticket=ticket)
    run_burst(worker_id=WORKER)
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/{handle.id}/change/")
    steps = page.locator("#job-steps tr.job-step td:first-child").all_inner_texts()
    assert steps == ["fetch", "check"]
    steps_tasks.FIXED_CHECKS.add(ticket)  # the fix is deployed
    try:
        button = page.locator("#job-steps tr.job-step").nth(1).locator("button")
        shown = messages_after(page, button.click)
        assert "Re-running from step 'check': the job is pending." in shown
        assert run_burst(worker_id=WORKER) == 1
    finally:
        steps_tasks.FIXED_CHECKS.discard(ticket)
    page.reload()
    outcomes = page.locator(".journal-entry td:nth-child(2)").all_inner_texts()
    assert outcomes == ["dead", "requeued", "completed"]
    assert "re-run from step 'check'" in page.locator(".journal-entry").nth(1).inner_text()
    assert "admin:olga" in page.locator(".journal-entry").nth(1).inner_text()
    page.screenshot(path=screenshots / "admin-job-rerun.png", full_page=True)
    job = Job.objects.get(id=handle.id)
    assert job.result == f"{ticket} fixed"
