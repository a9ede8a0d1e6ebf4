"""A page follows a job's stream in headless Chromium at 1,280 px: an ``EventSource`` on
``stream_response`` (tests/stream_urls.py) while a real worker (a ``runworker`` child)
runs a job that writes 100 chunks. Each response lasts 2 s, so the page reconnects with
``Last-Event-ID`` several times on the way; it ends with every chunk once, in order,
then the job's end event. The job's admin page then shows the stream's last items."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from django_jobqueue import Status
from django_jobqueue.admin.job_page import STREAM_SHOWN
from django_jobqueue.models import Job
from tests.browser.test_admin_flows import login
from tests.concurrency.conftest import runworker
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only, wait_for
from tests.taskapp import stream_tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
CHUNKS = 100

__all__ = ["runworker"]


@pytest.mark.urls("tests.stream_urls")
def test_a_page_follows_a_stream_of_100_chunks_in_order_through_reconnections(
    page: Any, live_server: Any, screenshots: Path, runworker: WorkerProcesses
) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", "1")
    handle = stream_tasks.chunks.enqueue(n=CHUNKS, pause=0.1)  # 10 s of writing or more
    connections: list[str] = []
    page.on("request", lambda r: connections.append(r.url) if "/events/" in r.url else None)
    page.goto(f"{live_server.url}/stream/{handle.id}/")
    page.wait_for_selector("body[data-done]", timeout=120_000)
    assert page.get_attribute("body", "data-done") == Status.COMPLETED
    offsets = page.eval_on_selector_all("#items li", "els => els.map(e => e.dataset.offset)")
    texts = page.eval_on_selector_all("#items li", "els => els.map(e => e.textContent)")
    assert offsets == [str(i) for i in range(1, CHUNKS + 1)]
    assert texts == [f"chunk {i}" for i in range(CHUNKS)]
    assert len(connections) >= 2, connections  # it reconnected on the way, and resumed
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED
    page.screenshot(path=str(screenshots / "stream-page.png"), full_page=True)


def test_the_job_page_shows_the_last_items_of_its_stream(
    page: Any, live_server: Any, screenshots: Path, runworker: WorkerProcesses
) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", "1")
    handle = stream_tasks.chunks.enqueue(n=30)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)
    login(page, live_server.url)
    page.goto(f"{live_server.url}/admin/django_jobqueue/job/{handle.id}/change/")
    section = page.locator("#job-stream")
    assert section.is_visible()
    assert "30 items" in section.inner_text()
    assert page.locator("#job-stream .job-stream-item").count() == STREAM_SHOWN
    assert page.evaluate(
        "() => document.documentElement.scrollWidth <= document.documentElement.clientWidth"
    )
    section.screenshot(path=str(screenshots / "job-page-stream.png"))
