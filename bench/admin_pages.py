"""``python -m bench.admin_pages``: the admin's pages on a table of a million jobs.

Fills a PostgreSQL database (its own, created if missing) with ``--jobs`` jobs by one
``INSERT … SELECT`` and about as many journal entries by another, then times each admin
page in-process (the view's server-side time, median of five after a warm-up) and
prints one line per page. The same fill and pages serve the test that EXPLAINs every
query of these pages (tests/scale/test_admin_scale.py).

Distribution: created over 30 days; 2 % dead, 1 % cancelled, the newest 2 % pending
(one in ten scheduled for later), 50 claimed, the rest completed; eight kinds, two
queues; a dedup key on one job in ten and an idempotency key on another.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

LIMIT_MS = 500.0
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/jobqueue_admin_pages"

# {jobs} and {journal} are the table names; %(n)s the number of jobs.
JOBS_SQL = """
INSERT INTO {jobs} (id, kind, queue, payload, priority, status, created_at, visible_at,
    claim_expires_at, claimed_by, run_count, failure_count, carry, result, dedup_key,
    idempotency_key, cancel_requested, cancel_actor, finished_at)
SELECT
    (lpad(to_hex((extract(epoch FROM t.at) * 1000)::bigint), 12, '0') || '7'
        || substr(md5(i::text), 1, 3) || '8' || substr(md5(i::text), 4, 15))::uuid,
    'shop.kind_' || (i %% 8), CASE WHEN i %% 8 = 1 THEN 'mail' ELSE 'default' END,
    jsonb_build_object('n', i), i %% 3, t.status, t.at,
    CASE WHEN t.status = 'pending' AND i %% 10 = 0 THEN now() + interval '1 hour' ELSE t.at END,
    CASE WHEN t.status = 'claimed' THEN now() + interval '5 minutes' END,
    CASE WHEN t.status = 'claimed' THEN 'host:1' ELSE '' END,
    CASE WHEN t.status = 'pending' THEN 0 ELSE 1 END,
    CASE WHEN t.status = 'dead' THEN 3 ELSE 0 END,
    '{{}}'::jsonb, CASE WHEN t.status = 'completed' THEN jsonb_build_object('ok', i) END,
    CASE WHEN i %% 10 = 3 THEN 'acct-' || (i %% 5000) END,
    CASE WHEN i %% 10 = 4 THEN 'order-' || i END,
    false, '',
    CASE WHEN t.status IN ('completed', 'dead', 'cancelled') THEN t.at + interval '1 second' END
FROM generate_series(1, %(n)s) AS i,
LATERAL (SELECT now() - (%(n)s - i) * interval '2.592 seconds' * (1000000.0 / %(n)s) AS at,
    CASE
        WHEN i > %(n)s - 50 THEN 'claimed'
        WHEN i > %(n)s * 0.98 THEN 'pending'
        WHEN i %% 100 < 2 THEN 'dead'
        WHEN i %% 100 = 2 THEN 'cancelled'
        ELSE 'completed'
    END AS status) AS t
"""

JOURNAL_SQL = """
INSERT INTO {journal} (job_id, kind, run_no, outcome, started_at, recorded_at, duration,
    note, attachment, worker, actor)
SELECT j.id, j.kind, 1, j.status, j.finished_at - interval '1 second', j.finished_at,
    make_interval(secs => 0.001 * (1 + (j.priority + 1) * 7)), '', NULL, 'host:1', ''
FROM {jobs} j WHERE j.status IN ('completed', 'dead', 'cancelled')
UNION ALL
SELECT j.id, j.kind, 1, 'retried', j.created_at, j.created_at + interval '500 ms',
    interval '0.4 seconds', 'planned failure', '{{"attempt": 1}}'::jsonb, 'host:1', ''
FROM {jobs} j WHERE j.status = 'dead'
"""


def fill(cursor: Any, *, jobs: int, vacuum: bool = False) -> None:
    """Insert ``jobs`` jobs and their journal into empty tables, then ANALYZE them (with
    ``vacuum``, VACUUM ANALYZE, as autovacuum would have by then: it needs autocommit)."""
    from django_jobqueue.models import Job, JournalEntry

    names = {"jobs": Job._meta.db_table, "journal": JournalEntry._meta.db_table}
    cursor.execute(JOBS_SQL.format(**names), {"n": jobs})
    cursor.execute(JOURNAL_SQL.format(**names))
    command = "VACUUM ANALYZE" if vacuum else "ANALYZE"
    cursor.execute(f"{command} {names['jobs']}")
    cursor.execute(f"{command} {names['journal']}")


def pages() -> list[tuple[str, str]]:
    """(name, URL) of each page measured, for the filled table."""
    from django.utils import timezone

    from django_jobqueue.admin.common import short_id
    from django_jobqueue.models import Job

    dead = Job.objects.filter(status="dead").order_by("-created_at").first()
    assert dead is not None, "fill the table first"
    day = (timezone.localtime() - timedelta(days=1)).date().isoformat()
    hour = timezone.localtime() - timedelta(hours=1)
    jobs = "/admin/django_jobqueue/job/"
    journal = "/admin/django_jobqueue/journalentry/"
    return [
        ("jobs, unfiltered", jobs),
        ("jobs, status dead", f"{jobs}?status__exact=dead"),
        ("jobs, created in a date range", f"{jobs}?created_at__range__gte_0={day}"),
        ("jobs, kind filter", f"{jobs}?kind=shop.kind_3"),
        ("jobs, search by id", f"{jobs}?q={dead.id}"),
        ("jobs, search by short id", f"{jobs}?q={short_id(dead.id)}"),
        ("jobs, search by key", f"{jobs}?q=order-4"),
        ("job page with its journal", f"{jobs}{dead.id}/change/"),
        ("journal, unfiltered", journal),
        (
            "journal, failures in the last hour",
            f"{journal}?outcome=failure&recorded_at__range__gte_0={hour.date().isoformat()}"
            f"&recorded_at__range__gte_1={hour:%H:%M:%S}",
        ),
        ("dashboard", f"{jobs}dashboard/"),
    ]


def _ensure_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin_url = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not found:
            conn.execute(f'CREATE DATABASE "{name}"')


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.admin_pages", description=__doc__)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--refill", action="store_true", help="empty the tables and fill again")
    args = p.parse_args(argv)
    _ensure_database(args.database_url)
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from django_jobqueue.models import Job, JournalEntry

    call_command("migrate", verbosity=0)
    if args.refill or not Job.objects.exists():
        JournalEntry.objects.all().delete()
        Job.objects.all().delete()
        started = time.monotonic()
        with connections["default"].cursor() as cursor:
            fill(cursor, jobs=args.jobs, vacuum=True)
        print(f"filled {args.jobs:,} jobs in {time.monotonic() - started:.1f}s")
    return _time_pages(staff_client())


def staff_client() -> Any:
    """A test client logged in as a superuser (made if missing)."""
    from django.contrib.auth.models import User
    from django.test import Client

    user, _ = User.objects.get_or_create(username="pages", defaults={"is_superuser": True})
    user.is_staff = user.is_superuser = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def timings(client: Any) -> list[tuple[str, float, float]]:
    """(name, median ms, max ms) of each page: a warm-up, then five timed loads."""
    out = []
    for name, url in pages():
        client.get(url)  # warm-up: plans, caches, templates
        times = []
        for _ in range(5):
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, (url, response.status_code)
        out.append((name, statistics.median(times), max(times)))
    return out


def _time_pages(client: Any) -> int:
    slow = 0
    print(f"{'page':40} {'median ms':>10} {'max ms':>8}")
    for name, median, most in timings(client):
        slow += median > LIMIT_MS
        flag = "" if median <= LIMIT_MS else f"  over {LIMIT_MS:.0f} ms"
        print(f"{name:40} {median:10.1f} {most:8.1f}{flag}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
