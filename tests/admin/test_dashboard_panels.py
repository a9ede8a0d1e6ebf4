"""The dashboard's issue-34 panels as each database renders them: table health with
what that database shows ("not available" for what it does not), and the history with
its range and kind links (an unknown range falls back to 6 h) and deploy markers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

import django_jobqueue
from django_jobqueue import store
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

DASHBOARD = "/admin/django_jobqueue/job/dashboard/"


def dashboard(client: Client, viewer: User, query: str = "") -> str:
    client.force_login(viewer)
    response = client.get(f"{DASHBOARD}{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_table_health_panel_says_what_this_database_shows(client: Client, viewer: User) -> None:
    tasks.add.enqueue(a=1, b=2)
    page = dashboard(client, viewer)
    assert 'id="table-health"' in page
    assert f'data-table="{Job._meta.db_table}"' in page
    if connection.vendor == "sqlite":
        assert "Vacuum horizon: not available on this database." in page
        assert "SQLite keeps no dead rows" in page
        assert "Free space in the database file" in page
        assert "<td>not available</td>" in page  # dead rows, vacuum, analyze
    else:
        # PostgreSQL, and MariaDB with the PROCESS privilege (the tests' root).
        assert "Vacuum horizon: nothing has held it back for over 5m" in page
    if connection.vendor == "mysql":
        assert "InnoDB counts no dead rows" in page
        assert "<td>not available</td>" in page


def test_the_history_panel_draws_runs_markers_and_its_links(client: Client, viewer: User) -> None:
    now = timezone.now()
    store.sample_history(now=now - timedelta(minutes=3), min_gap=timedelta(seconds=1))
    tasks.add.enqueue_many([{"a": n, "b": n} for n in range(3)])
    run_jobs(kinds=[tasks.add])
    store.sample_history(now=now, min_gap=timedelta(seconds=1))
    django_jobqueue.mark("deploy <1.4.2>", by="ci")
    page = dashboard(client, viewer)
    assert '<strong class="current">6h</strong>' in page  # the default range
    for name in ("1h", "24h", "7d"):
        assert f'href="?history={name}#history"' in page
    assert f'href="?history=6h&amp;history_kind={tasks.add.kind}#history"' in page
    assert 'class="completed"' in page
    assert page.count('<g class="marker">') == 2  # across both charts
    assert "deploy &lt;1.4.2&gt;" in page  # escaped
    assert f'data-kind="{tasks.add.kind}"><td>{tasks.add.kind}</td><td>3</td>' in page
    # An unknown range is the default one; a kind with no runs, an empty table.
    page = dashboard(client, viewer, "?history=1y&history_kind=nope")
    assert '<strong class="current">6h</strong>' in page
    assert "No runs in this range." in page
