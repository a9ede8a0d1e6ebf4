"""Issue 34's dashboard panels in headless Chromium at 1,280 px, on PostgreSQL: the
table-health panel names a transaction held open in another session (a second psycopg
connection that began a transaction, read the jobs table and stays idle in it past
HEALTH_HORIZON_AGE, set to a second here); the history chart draws the runs sampled
from the tally and a marker set by ``jobqueue mark``, over each range."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.browser.test_admin_flows import login
from tests.helpers import manage_in_process, postgres_only, wait_for
from tests.taskapp import tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

WIDTH = 1280
APP = "held-open-by-a-test"


@pytest.fixture
def held_open() -> Iterator[int]:
    """A second session, idle in a transaction that read the jobs table; its pid."""
    import psycopg

    s = connection.settings_dict
    other = psycopg.connect(
        dbname=s["NAME"],
        user=s.get("USER") or None,
        password=s.get("PASSWORD") or None,
        host=s.get("HOST") or "127.0.0.1",
        port=s.get("PORT") or None,
        application_name=APP,
    )
    try:
        other.execute(f"SELECT count(*) FROM {Job._meta.db_table}").fetchall()  # BEGIN, read
        yield int(other.info.backend_pid)
    finally:
        other.rollback()
        other.close()


def no_horizontal_scroll(page: Any) -> None:
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert overflow == 0, overflow


def test_the_table_health_panel_names_a_transaction_held_open_in_another_session(
    page: Any, live_server: Any, screenshots: Path, settings: Any, held_open: int
) -> None:
    settings.JOBQUEUE = {**settings.JOBQUEUE, "HEALTH_HORIZON_AGE": 1}
    wanted = f"pid {held_open}"
    # Past the threshold before the page is read (no sleep: the condition itself).
    wait_for(
        lambda: any(
            h.name == wanted
            for h in store.table_health(horizon_age=timedelta(seconds=1), dead_ratio=0.2).holders
            or []
        ),
        timeout=30,
    )
    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/dashboard/")
    panel = page.locator("#table-health")
    warning = panel.locator("p.health-warning", has_text=wanted)
    assert warning.count() == 1
    text = warning.inner_text()
    assert f"transaction {wanted}" in text
    assert APP in text
    assert "idle in transaction" in text
    assert "open too long" in text
    # Each queue table has its row, the jobs table first, with PostgreSQL's readings.
    first = panel.locator("tr.health-row").first
    assert first.get_attribute("data-table") == Job._meta.db_table
    assert "not available" not in first.inner_text()
    assert "HEALTH_HORIZON_AGE" in panel.inner_text()
    no_horizontal_scroll(page)
    panel.screenshot(path=screenshots / "admin-dashboard-table-health-1280.png")


def test_the_history_chart_draws_sampled_runs_and_a_marker_from_jobqueue_mark(
    page: Any, live_server: Any, screenshots: Path
) -> None:
    now = timezone.now()
    store.sample_history(now=now - timedelta(minutes=2), min_gap=timedelta(seconds=1))
    tasks.add.enqueue_many([{"a": n, "b": n} for n in range(12)])
    tasks.noop.enqueue_many([{}] * 5)
    assert len(run_jobs(kinds=[tasks.add, tasks.noop])) == 17
    store.sample_history(now=timezone.now(), min_gap=timedelta(seconds=1))
    ran = manage_in_process("jobqueue", "mark", "deploy 1.4.2")
    assert ran.returncode == 0, ran.stderr

    base = live_server.url
    login(page, base)
    page.goto(f"{base}/admin/django_jobqueue/job/dashboard/?history=1h#history")
    panel = page.locator("#history")
    runs = panel.locator("svg#history-runs")
    assert runs.locator("rect.completed").count() >= 1
    marker = runs.locator("g.marker")
    assert marker.count() == 1
    assert "deploy 1.4.2" in marker.locator("text").text_content()
    assert "by manage.py jobqueue (" in marker.locator("title").text_content()
    # The marker sits on the right of the hour's plot (it was set just now), inside it.
    x = float(marker.locator("line").get_attribute("x1"))
    width = float(runs.get_attribute("width"))
    assert width * 0.8 < x <= width
    assert panel.locator("svg#history-durations g.marker").count() == 1
    assert panel.locator("svg#history-durations g.p50 circle").count() == 1
    rows = {
        r.get_attribute("data-kind"): r.inner_text()
        for r in panel.locator("tr.history-kind-row").all()
    }
    assert rows.keys() == {tasks.add.kind, tasks.noop.kind}
    assert rows[tasks.add.kind].split("\t")[1] == "12"
    assert panel.locator("li.marker-row", has_text="deploy 1.4.2").count() == 1
    no_horizontal_scroll(page)
    panel.screenshot(path=screenshots / "admin-dashboard-history-1280.png")

    # Another range, then one kind: the marker stays; the kind's runs alone.
    panel.locator("#history-ranges a", has_text="24h").click()
    page.wait_for_url("**history=24h**")
    assert page.locator("#history-ranges strong.current").first.inner_text() == "24h"
    assert page.locator("svg#history-runs g.marker").count() == 1
    page.locator("#history-ranges a", has_text=tasks.noop.kind).click()
    page.wait_for_url("**history_kind=**")
    kinds = page.locator("#history tr.history-kind-row").all()
    assert [r.get_attribute("data-kind") for r in kinds] == [tasks.noop.kind]
    assert page.locator("svg#history-runs g.marker").count() == 1
