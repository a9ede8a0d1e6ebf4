"""The admin on a million jobs (PostgreSQL): every query of every page, run again under
``EXPLAIN ANALYZE``, reads only a small part of the jobs and journal tables: no page
counts or scans either table whole, so a page costs the same at any table size.

The table is filled by ``bench.admin_pages.fill`` (one ``INSERT … SELECT`` for the jobs,
one for their journal); ``python -m bench.admin_pages`` times the same pages.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.admin_pages import fill, pages
from django_jobqueue.models import Job, JournalEntry
from tests.helpers import postgres_only

pytestmark = [postgres_only, pytest.mark.django_db]

JOBS = 1_000_000
# No node of any plan may read more rows of the jobs or journal table than this: 5 % of
# the table. (The largest legitimate reads are the dashboard's counts of dead jobs, 2 %,
# and of the last day's journal, about 3 %.)
MOST_ROWS = JOBS // 20
TABLES = (Job._meta.db_table, JournalEntry._meta.db_table)
PAGES = 11  # len(bench.admin_pages.pages()), which needs the filled table to list them


@pytest.fixture(scope="module")
def million(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """A million jobs and their journal, filled once for the module, emptied after."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        fill(cursor, jobs=JOBS)
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(TABLES)}")


def rows_read(node: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """(node description, rows it read) for every node touching a queue table or index."""
    relation = node.get("Relation Name", "")
    index = node.get("Index Name", "")
    if relation in TABLES or index.startswith(("jobqueue_", "django_jobqueue_")):
        read = (
            node.get("Actual Rows", 0)
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Index Recheck", 0)
        ) * max(node.get("Actual Loops", 1), 1)
        yield f"{node['Node Type']} on {relation or index}", int(read)
    for child in node.get("Plans", []):
        yield from rows_read(child)


def explained(sql: str) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return dict(plan[0]["Plan"])


@pytest.mark.usefixtures("million")
@pytest.mark.parametrize("page", range(PAGES))
def test_no_query_of_an_admin_page_reads_the_whole_jobs_or_journal_table(page: int) -> None:
    name, url = pages()[page]
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (name, url)
    checked = 0
    for query in captured.captured_queries:
        sql = query["sql"]
        if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        if not any(t in sql for t in TABLES):
            continue
        checked += 1
        for node, read in rows_read(explained(sql)):
            assert read <= MOST_ROWS, f"{name}: {node} read {read:,} rows\n{sql}"
        # No unrestricted COUNT(*): a count either stops at the cap or has a condition.
        if "COUNT(" in sql.upper():
            assert " LIMIT " in sql.upper() or " WHERE " in sql.upper(), f"{name}: {sql}"
    assert checked >= 1, name  # the page did read the queue tables
