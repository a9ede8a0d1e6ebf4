"""A job that is not running says why, in headless Chromium at 1,280 px: a job in a
paused queue shows, under its title, who paused the queue and since when, a link to the
dashboard's queues and a "Resume the queue" button; the button resumes the queue in
place (back on the job's page, which then says the job is next), and a worker runs it.
The jobs list shows the same reason on hover of its badge, without widening the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from django_jobqueue import Status, pause_queue, store
from django_jobqueue.models import Job
from django_jobqueue.task.registry import registry
from testproject.shop import tasks as shop
from tests.browser.conftest import messages_after
from tests.browser.test_admin_flows import WORKER, login
from tests.helpers import postgres_only, run_burst

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

WIDTH = 1280


def test_a_paused_queues_job_says_why_and_resumes_it_in_place(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    store.register_worker(
        worker_id="app-2:5151",
        host="app-2",
        pid=5151,
        queues=[],
        kinds=registry.kinds(),
        concurrency=8,
    )
    held = shop.send_receipt.using(queue="mail").enqueue(order_id=7, email="held@example.com")
    pause_queue("mail", actor="olga (night shift)")
    base = live_server.url
    login(page, base)

    # The list: the reason on hover of the status badge, and no horizontal scroll.
    page.goto(f"{base}/admin/django_jobqueue/job/")
    hover = page.locator("#result_list span.jq-why").first.get_attribute("title")
    assert hover is not None
    assert hover.startswith("queue_paused: queue 'mail' paused by olga (night shift) since ")
    assert page.evaluate(
        "() => { const t = document.querySelector('#result_list');"
        " const box = t.closest('.results') || t.parentElement;"
        " return t.scrollWidth <= box.clientWidth; }"
    )

    # The job's page: the reason under the title, its link, the button in place.
    page.goto(f"{base}/admin/django_jobqueue/job/{held.id}/change/")
    line = page.locator("#job-why")
    assert line.is_visible()
    text = line.inner_text()
    assert "queue 'mail' paused by olga (night shift) since " in text
    link = page.locator("#job-why-link")
    assert link.get_attribute("href") == "/admin/django_jobqueue/job/dashboard/#queues"
    button = page.locator("#job-why-action")
    assert button.inner_text() == "Resume the queue"
    page.screenshot(path=screenshots / "admin-job-why-paused.png", full_page=False)

    assert run_burst(worker_id=WORKER) == 0  # the worker leaves the paused queue alone
    assert "Queue mail resumed." in messages_after(page, button.click)
    assert page.url == f"{base}/admin/django_jobqueue/job/{held.id}/change/"
    assert page.locator("#job-why").get_attribute("data-code") == "next"
    assert page.locator("#job-why-action").count() == 0
    assert store.paused_queues() == []
    assert run_burst(worker_id=WORKER) == 1
    assert Job.objects.get(id=held.id).status == Status.COMPLETED
