"""The admin on a big table (PostgreSQL): every query of every page, run again under
``EXPLAIN ANALYZE``, reads only a small part of the jobs and journal tables: no page
counts or scans either table whole, so a page costs the same at any table size.

The table is filled with ``bench.admin_pages``'s statements (one ``INSERT … SELECT`` for
the jobs, one for their journal) as a bulk load (``tests/scale/bulk.py``);
``python -m bench.admin_pages`` times the same pages.

CI fills 500,000 jobs, ``JOBQUEUE_LONG_TESTS=1`` a million. The bound is a share of the
table (5 %) and the fill's mix is the same share for share at any size, so a page that
reads a share of the table (a scan, an unbounded count) fails at either size. A page
that reads a fixed number of rows must stay under the share of the smaller table: the
largest such read, the capped count of one kind's jobs (2,001 matches of one kind in
eight, about 16,000 rows), is 3.2 % of 500,000 (and would fail at 250,000). A smaller
table only makes an index less attractive to the planner against a scan, so a plan that
keeps to its index here keeps to it on the bigger table too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.admin_pages import pages
from django_jobqueue.models import Job, JournalEntry
from tests.helpers import postgres_only
from tests.scale.bulk import fill_fast

pytestmark = [postgres_only, pytest.mark.django_db]

JOBS = 1_000_000 if os.environ.get("JOBQUEUE_LONG_TESTS") == "1" else 500_000
# No node of any plan may read more rows of the jobs or journal table than this: 5 % of
# the table. (The largest legitimate reads are the dashboard's counts of dead jobs, 2 %,
# and of the last day's journal, about 3 %.)
MOST_ROWS = JOBS // 20
TABLES = (Job._meta.db_table, JournalEntry._meta.db_table)
PAGES = 11  # len(bench.admin_pages.pages()), which needs the filled table to list them


@pytest.fixture(scope="module")
def million(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """The jobs and their journal, filled once for the module, emptied after."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        fill_fast(cursor, jobs=JOBS)
    yield
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(TABLES)} CASCADE")  # and the workflows' edges


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
