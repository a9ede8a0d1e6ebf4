"""Live pages in headless Chromium at 1,280 px on PostgreSQL, a real worker settling:
the dashboard's counters change within a second of a settlement with no reload; a
progressing job's bar moves at least once a second and, once completed, shows no stale
value; a workflow page's step states change as its steps run. Each change is timed in
the page (a MutationObserver's Date.now()) against the settlement's own recorded time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from django_jobqueue import Status, cancel, chain, job
from django_jobqueue.models import Workflow
from django_jobqueue.store import listening
from tests.browser.test_admin_flows import login
from tests.helpers import WorkerThread, is_postgres, postgres_only, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True)]

WIDTH = 1280

# Records, in the page, each change inside the element ``sel`` matches: when, and the
# text of ``value`` then (null when there is none).
OBSERVE = """([sel, value]) => {
  window.__live = {changes: []};
  const text = () => { const v = document.querySelector(value); return v ? v.innerText : null; };
  const seen = () => window.__live.changes.push([Date.now(), text()]);
  new MutationObserver(seen).observe(document.querySelector(sel),
    {subtree: true, childList: true, characterData: true, attributes: true});
}"""


@pytest.fixture(autouse=True)
def _listener(page: Any) -> Iterator[None]:
    """After the test, its page closed first: its streams end (at their next heartbeat,
    ``live.HEARTBEAT``), then the process's listener, before the test database goes."""
    yield
    page.context.close()
    if listening.supported():
        wait_for(lambda: listening.hub().subscribers() == 0, timeout=30)
    listening.stop_all()


def live(page: Any, url: str, observe: str, value: str) -> None:
    """Open ``url``, wait until its event stream is open, then record the changes inside
    ``observe`` (with ``value``'s text)."""
    page.goto(url)
    page.wait_for_selector("html[data-live-open]")
    page.evaluate(OBSERVE, [observe, value])


def not_reloaded(page: Any) -> bool:
    return bool(page.evaluate("() => window.__live !== undefined"))


@postgres_only
def test_the_dashboards_counters_change_within_a_second_of_a_settlement_with_no_reload(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    login(page, live_server.url)
    handle = tasks.timed_sleep.enqueue(seconds=2.5)
    worker = WorkerThread(kinds=[tasks.timed_sleep.kind], worker_id="web-live:1").start()
    try:
        wait_for(lambda: job(handle.id).status == Status.CLAIMED, timeout=30)
        claimed = ".jq-card.claimed .value"
        live(page, f"{live_server.url}/admin/django_jobqueue/job/dashboard/", "#cards", claimed)
        assert page.locator(claimed).inner_text() == "1"
        wait_for(lambda: job(handle.id).status == Status.COMPLETED, timeout=30)
        page.wait_for_function(
            "() => document.querySelector('.jq-card.claimed .value').innerText === '0'",
            timeout=10_000,
        )
    finally:
        worker.stop()
    settled_ms = job(handle.id).finished_at.timestamp() * 1000
    changes = page.evaluate("() => window.__live.changes")
    changed_ms = next(at for at, text in changes if text == "0")
    assert not_reloaded(page)
    latency = changed_ms - settled_ms
    assert latency < 1000, f"the counter changed {latency:.0f} ms after the settlement"
    page.screenshot(path=screenshots / "admin-dashboard-live-1280.png", full_page=True)
    print(f"dashboard: counter changed {latency:.0f} ms after the settlement")


@postgres_only
def test_a_progressing_jobs_bar_moves_every_second_and_a_completed_job_shows_none(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    login(page, live_server.url)
    handle = tasks.reports_progress.enqueue(steps=16, step_seconds=0.5)
    worker = WorkerThread(kinds=[tasks.reports_progress.kind], worker_id="web-live:2").start()
    try:
        wait_for(lambda: job(handle.id).progress is not None, timeout=30)
        url = f"{live_server.url}/admin/django_jobqueue/job/{handle.id}/change/"
        live(page, url, "#job-fields", "#job-fields .jq-progress small")
        page.wait_for_function(
            "() => window.__live.changes.length >= 5 || "
            "document.querySelector('#job-status').innerText.includes('completed')",
            timeout=30_000,
        )
        page.screenshot(path=screenshots / "admin-job-live-progress-1280.png", full_page=True)
        wait_for(lambda: job(handle.id).status == Status.COMPLETED, timeout=60)
        page.wait_for_function(
            "() => document.querySelector('#job-status').innerText.includes('completed')",
            timeout=10_000,
        )
    finally:
        worker.stop()
    assert not_reloaded(page)
    assert page.locator("#job-fields progress").count() == 0  # no stale bar
    assert "%" not in page.locator("#job-fields").inner_text()
    # The bar's value, each time it changed while the job ran: a new one at least
    # about once a second (progress is written once a second).
    values = [(at, text) for at, text in page.evaluate("() => window.__live.changes") if text]
    moves = [at for (at, v), (_, before) in zip(values[1:], values, strict=False) if v != before]
    assert len(moves) >= 3, values
    gaps = [b - a for a, b in itertools.pairwise(moves)]
    assert max(gaps) < 2000, f"the bar stood still for {max(gaps):.0f} ms: {values}"
    print(f"progress: moves {len(moves)}, gaps ms {[round(g) for g in gaps]}")


@postgres_only
def test_a_workflow_pages_step_states_change_as_its_steps_run(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    login(page, live_server.url)
    flow = chain(
        tasks.timed_sleep.s(seconds=1.0),
        tasks.timed_sleep.s(seconds=1.0),
        tasks.timed_sleep.s(seconds=1.0),
        name="live-chain",
    ).enqueue()
    wf = Workflow.objects.get(name="live-chain")
    url = f"{live_server.url}/admin/django_jobqueue/workflow/{wf.id}/change/"
    live(page, url, "#content-main", "#workflow-counts")
    worker = WorkerThread(kinds=[tasks.timed_sleep.kind], worker_id="web-live:3").start()
    try:
        page.wait_for_function(
            "() => document.querySelector('#workflow-status').innerText.includes('completed')",
            timeout=60_000,
        )
    finally:
        worker.stop()
    assert flow is not None
    assert not_reloaded(page)
    counts_seen = {text for _, text in page.evaluate("() => window.__live.changes")}
    assert len(counts_seen) >= 3, counts_seen  # the steps' states changed, step by step
    states = page.locator("#graph .jq-node").evaluate_all("ns => ns.map(n => n.dataset.status)")
    assert states == ["completed"] * 3, states
    counts = page.locator("#workflow-counts").inner_text()
    assert "completed 3" in counts, counts
    page.screenshot(path=screenshots / "admin-workflow-live-1280.png", full_page=True)


@pytest.mark.sqlite
@pytest.mark.skipif(is_postgres(), reason="the poll is where nothing notifies")
def test_where_nothing_notifies_the_dashboard_polls_and_changes_without_a_reload(
    page: Any, live_server: Any
) -> None:
    login(page, live_server.url)
    handle = tasks.add.enqueue(1, 2)
    page.goto(f"{live_server.url}/admin/django_jobqueue/job/dashboard/")
    page.wait_for_selector("html[data-live-mode=poll]")
    pending = ".jq-card.pending .value"
    before = page.locator(pending).first.inner_text()
    page.evaluate(OBSERVE, ["#cards", pending])
    cancel(job_id=handle.id)  # a settlement: one pending job fewer, one cancelled more
    page.wait_for_function(
        "() => document.querySelector('.jq-card.cancelled .value').innerText === '1'",
        timeout=15_000,
    )
    assert not_reloaded(page)
    assert page.locator(pending).first.inner_text() != before
