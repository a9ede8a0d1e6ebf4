"""A big history at the speed of a bulk load: ``journal`` journal entries and about
``jobs`` finished jobs, spread over 30 days, on the plain or the partitioned journal.

The approach of tests/scale/bulk.py, whose pieces these are: the queue tables' secondary
indexes set aside, the rows written by ``INSERT … SELECT generate_series`` in one
transaction, the indexes built again from their own definitions, then ``VACUUM
ANALYZE`` (what autovacuum would have done by then; the development server runs with it
off). The jobs are ``bench.admin_pages``'s (the same kinds, keys and 30 days, so that its
admin pages find what they look for), less its newest 2 % that are pending or claimed: a
history is finished jobs, and the benchmark's workers must find none of them to claim.
Their journal is ``bench.admin_pages``'s too (an entry per finished job, two per dead
one); the rest of the ``journal`` entries are those of jobs already deleted, as in an
installation that keeps its journal longer than its jobs: one in fifty a retry, the rest
completions, recorded evenly over the same 30 days.

The partitioned journal is made by the store's own conversion (``jobqueue partitions
--convert``) while it is empty, with a partition per UTC day from 31 days back to two
ahead, so that the rows land in their day's partition as they are written.

Runs inside Django (``bench.scale_db``): the model's table names, the store's conversion.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

from bench.admin_pages import JOBS_SQL, JOURNAL_SQL

FINISHED = ("completed", "dead", "cancelled")
DAYS = 30  # the history's span (bench.admin_pages' JOBS_SQL spreads its jobs so)
# Of JOBS_SQL's rows, the share it leaves finished (the newest 2 % pending or claimed).
FINISHED_SHARE = 0.98
# Memory for one index build at a time (the server's default, 64 MB, sorts on disk).
BUILD_MEMORY = "1GB"

# Entries of jobs already deleted (none of whose rows is left to join): %(n)s of them,
# evenly from 30 days ago to now, one in fifty a retry.
DELETED_JOBS_JOURNAL_SQL = """
INSERT INTO {journal} (job_id, kind, run_no, outcome, started_at, recorded_at, duration,
    note, attachment, worker, actor)
SELECT md5('deleted-' || i)::uuid, 'shop.kind_' || (i %% 8), 1,
    CASE WHEN i %% 50 = 0 THEN 'retried' ELSE 'completed' END,
    e.at - interval '8 ms', e.at, interval '8 ms',
    CASE WHEN i %% 50 = 0 THEN 'planned failure' ELSE '' END, NULL, 'host:1', ''
FROM generate_series(1, %(n)s) AS i,
LATERAL (SELECT now() - make_interval(secs => %(seconds)s * (%(n)s - i) / %(n)s) AS at) AS e
"""


def tables() -> tuple[str, str]:
    from django_jobqueue.models import Job, JournalEntry

    return Job._meta.db_table, JournalEntry._meta.db_table


@contextlib.contextmanager
def indexes_aside(cursor: Any, names: Sequence[str]) -> Iterator[None]:
    """Inside one transaction: the tables' secondary indexes dropped (a partitioned
    parent's take its partitions' with them), the foreign-key triggers off for a
    superuser (the rows are consistent by construction), and on the way out every
    index built again from its own definition. A failure leaves everything as it was."""
    from django.db import transaction

    with transaction.atomic():
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            " AND tablename = ANY(%s) AND indexname NOT IN"
            " (SELECT conname FROM pg_constraint WHERE contype IN ('p', 'u', 'x'))",
            [list(names)],
        )
        secondary = cursor.fetchall()
        for name, _ in secondary:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        (superuser,) = cursor.fetchone()
        if superuser:
            cursor.execute("SET LOCAL session_replication_role = replica")
        yield
        if superuser:
            cursor.execute("SET LOCAL session_replication_role = DEFAULT")
        cursor.execute(f"SET LOCAL maintenance_work_mem = '{BUILD_MEMORY}'")
        for _, definition in secondary:
            # A partitioned parent's index reads "ON ONLY parent": built so, it would be
            # the parent's alone, invalid, with no index on any partition.
            cursor.execute(definition.replace(" ON ONLY ", " ON ", 1))


def partition_by_day() -> int:
    """The journal swapped for one partitioned by day, a partition per day from
    ``DAYS + 1`` days back to two ahead (the store's conversion; the journal empty)."""
    from django.utils import timezone

    from django_jobqueue.store.partitions import partition_journal

    start = timezone.now() - timedelta(days=DAYS + 1)
    return partition_journal(period="day", ahead=DAYS + 3, now=start)


def fill_history(cursor: Any, *, journal: int, jobs: int, vacuum: bool = True) -> dict[str, float]:
    """About ``jobs`` finished jobs and exactly ``journal`` entries (fewer only when the
    finished jobs' own entries outnumber it) into empty tables; the seconds of the rows
    and of the index builds, and what was written. ``vacuum``: VACUUM ANALYZE after (it
    needs autocommit), else ANALYZE alone (inside a test's transaction)."""
    import time

    jobs_table, journal_table = names = tables()
    started = time.monotonic()
    with indexes_aside(cursor, names):
        cursor.execute(
            JOBS_SQL.format(jobs=jobs_table, journal=journal_table),
            {"n": math.ceil(jobs / FINISHED_SHARE)},
        )
        gone = f"DELETE FROM {jobs_table} WHERE status <> ALL(%s)"  # noqa: S608 (the model's)
        cursor.execute(gone, [list(FINISHED)])
        cursor.execute(JOURNAL_SQL.format(jobs=jobs_table, journal=journal_table))
        own = cursor.rowcount
        deleted_jobs = max(journal - own, 0)
        if deleted_jobs:
            cursor.execute(
                DELETED_JOBS_JOURNAL_SQL.format(journal=journal_table),
                {"n": deleted_jobs, "seconds": DAYS * 86400.0},
            )
        rows_at = time.monotonic()
    built_at = time.monotonic()
    for table in names:
        cursor.execute(f"{'VACUUM ANALYZE' if vacuum else 'ANALYZE'} {table}")
    cursor.execute(f"SELECT count(*) FROM {jobs_table}")  # noqa: S608 (the model's table)
    (finished,) = cursor.fetchone()
    return {
        "rows_seconds": rows_at - started,
        "indexes_seconds": built_at - rows_at,
        "vacuum_seconds": time.monotonic() - built_at,
        "jobs": finished,
        "journal": own + deleted_jobs,
    }


def sizes(cursor: Any) -> dict[str, int]:
    """Bytes on disk of the jobs and journal tables (a partitioned one: its partitions
    together), each with and without its indexes, and of the whole database."""
    out: dict[str, int] = {}
    for label, table in zip(("jobs", "journal"), tables(), strict=True):
        cursor.execute(
            "SELECT sum(pg_total_relation_size(r)), sum(pg_relation_size(r)) FROM"
            " (SELECT relid AS r FROM pg_partition_tree(%s) UNION SELECT %s::regclass) AS t",
            [table, table],
        )
        total, heap = cursor.fetchone()
        out[f"{label}_total"] = int(total or 0)
        out[f"{label}_heap"] = int(heap or 0)
    cursor.execute("SELECT pg_database_size(current_database())")
    out["database"] = int(cursor.fetchone()[0])
    return out
