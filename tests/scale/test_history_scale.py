"""A big history (``bench.history``, the loader of ``python -m bench.scale``) on the plain
and on the partitioned journal: loaded as asked, every admin page answering, and
retention dropping a day of the partitioned journal whole.

By default a small history (60,000 entries, 6,000 jobs) and no timing: CI checks that the
loader, the pages and the drop work on it. ``JOBQUEUE_LONG_TESTS=1`` loads 2,000,000
entries and 200,000 jobs and asserts the bounds issue 33 sets: every page's median time
under 500 ms, a day's partition dropped in under a second. The figures at 10 and 100
times that are ``python -m bench.scale``'s (docs/explanation/scaling.md).
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.admin_pages import LIMIT_MS, pages
from bench.history import DAYS, fill_history, partition_by_day, tables
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.store.partitions import drop_older, journal_layout
from tests.helpers import postgres_only

pytestmark = [postgres_only, pytest.mark.django_db]

LONG = os.environ.get("JOBQUEUE_LONG_TESTS") == "1"
JOURNAL, JOBS = (2_000_000, 200_000) if LONG else (60_000, 6_000)
DROP_LIMIT_S = 1.0


def _load(layout: str) -> dict[str, Any]:
    """The history, loaded inside the test's transaction (its rollback empties it, and
    gives the next test the one-table journal back)."""
    if layout == "partitioned":
        partition_by_day()
    with connection.cursor() as cursor:
        filled = fill_history(cursor, journal=JOURNAL, jobs=JOBS, vacuum=False)
    return {"layout": layout, **filled}


@pytest.fixture(params=["plain", "partitioned"])
def history(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _load(request.param)


def test_the_history_is_loaded_as_asked(history: dict[str, Any]) -> None:
    assert JournalEntry.objects.count() == history["journal"] == JOURNAL
    finished = Job.objects.filter(status__in=["completed", "dead", "cancelled"]).count()
    assert finished == Job.objects.count() == history["jobs"]
    assert abs(finished - JOBS) <= JOBS // 100
    with connection.cursor() as cursor:  # every index rebuilt, valid, on every partition
        cursor.execute(
            "SELECT count(*) FILTER (WHERE NOT i.indisvalid), count(*) FROM pg_index AS i"
            " WHERE i.indrelid IN"
            " (SELECT relid FROM pg_partition_tree(%s) UNION SELECT %s::regclass)",
            [tables()[1], tables()[1]],
        )
        invalid, indexes = cursor.fetchone()
    assert invalid == 0
    layout = journal_layout()
    if history["layout"] == "plain":
        assert layout is None
        assert indexes == 5
        return
    assert layout is not None
    holding = [p for p in layout.partitions if p.rows > 0]
    assert len(holding) >= DAYS  # a day's entries in each day's partition...
    assert all(not p.default for p in holding)  # ...none left to the default one
    assert indexes == 5 * (len(layout.partitions) + 1)


def _staff() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def test_every_admin_page_answers_on_the_history(history: dict[str, Any]) -> None:
    client = _staff()
    slow = {}
    for name, url in pages():
        assert client.get(url).status_code == 200, (name, url)  # and the warm-up
        if LONG:
            times = []
            for _ in range(3):
                started = time.perf_counter()
                client.get(url)
                times.append((time.perf_counter() - started) * 1000)
            if statistics.median(times) > LIMIT_MS:
                slow[name] = statistics.median(times)
    assert slow == {}, f"pages over {LIMIT_MS:.0f} ms on {history['layout']}: {slow}"


def test_retention_drops_the_oldest_day_of_the_partitioned_journal_whole() -> None:
    _load("partitioned")
    layout = journal_layout()
    assert layout is not None
    # The history reaches back DAYS from now, so its oldest day is only the part of a
    # day after this time of day (a handful of entries in the evening): the first day
    # holding half a day's share or more is dropped, with the partial one before it.
    day = next(p for p in layout.partitions if p.rows > JOURNAL // (2 * DAYS))
    assert day.upper is not None
    held = JournalEntry.objects.filter(recorded_at__lt=day.upper).count()
    assert held > JOURNAL // (2 * DAYS)  # a day's share of the entries, about
    with CaptureQueriesContext(connection) as captured:
        started = time.perf_counter()
        dropped = drop_older(before=day.upper)
        seconds = time.perf_counter() - started
    assert dropped is not None
    assert day.name in dropped
    statements = " ".join(q["sql"].upper() for q in captured.captured_queries)
    assert "DROP TABLE" in statements
    assert "DELETE" not in statements
    assert JournalEntry.objects.count() == JOURNAL - held  # that day's, no other
    assert not JournalEntry.objects.filter(recorded_at__lt=day.upper).exists()
    assert JournalEntry.objects.filter(recorded_at__gte=day.upper + timedelta(days=1)).exists()
    if LONG:
        assert seconds < DROP_LIMIT_S, f"{held:,} entries dropped in {seconds:.2f} s"
