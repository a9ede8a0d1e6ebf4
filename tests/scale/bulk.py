"""The million-job tables filled at the speed of a bulk load: the queue tables' secondary
indexes set aside (``bench.history.indexes_aside``), the rows inserted by
``bench.admin_pages``'s statements, the indexes built again from their own definitions,
then ANALYZE.

Building an index over rows already there is one sort; keeping fourteen of them up to
date row by row is most of a fill's time (and the journal's foreign key, checked row by
row, much of the rest: a superuser skips that check, the rows being consistent by
construction). The pages see the same tables: the same rows, the same index
definitions, the same statistics.
"""

from __future__ import annotations

from typing import Any

from bench.admin_pages import JOBS_SQL, JOURNAL_SQL
from bench.history import indexes_aside
from django_jobqueue.models import Job, JournalEntry

TABLES = (Job._meta.db_table, JournalEntry._meta.db_table)


def fill_fast(cursor: Any, *, jobs: int) -> None:
    """``bench.admin_pages.fill`` into empty tables, in one transaction (a failure leaves
    the tables and every index as they were)."""
    names = {"jobs": TABLES[0], "journal": TABLES[1]}
    with indexes_aside(cursor, TABLES):
        cursor.execute(JOBS_SQL.format(**names), {"n": jobs})
        cursor.execute(JOURNAL_SQL.format(**names))
    for table in TABLES:
        cursor.execute(f"ANALYZE {table}")
