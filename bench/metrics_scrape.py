"""``python -m bench.metrics_scrape``: a metrics scrape on an empty journal and on a long one.

In a PostgreSQL database of its own (created if missing, emptied first): ``--jobs`` jobs
(``admin_pages``'s fill, its journal dropped) and a full run tally (20 kinds, every run
outcome, every shard); times ``metrics.exposition()`` (median of 15 after a warm-up)
with an empty journal, fills ``--journal`` entries by one ``INSERT … SELECT``, and times
it again in the same run. A scrape reads the tally, never the journal, so the two
should be alike: exits 1 when the long journal's median is over twice the empty one's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench.admin_pages import JOBS_SQL, _ensure_database

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/jobqueue_metrics_scrape"
LIMIT = 2.0

# {journal}, {jobs}: the tables; %(n)s entries spread over the finished jobs.
JOURNAL_SQL = """
INSERT INTO {journal} (job_id, kind, run_no, outcome, started_at, recorded_at, duration,
    note, attachment, worker, actor)
SELECT f.id, f.kind, 1, CASE WHEN mod(g, 10) = 0 THEN 'retried' ELSE 'completed' END,
    now(), now() - g * interval '1 second', mod(g, 5000) * interval '1 ms', '', NULL,
    'host:1', ''
FROM generate_series(0, %(n)s - 1) AS g
JOIN (SELECT id, kind, row_number() OVER (ORDER BY id) - 1 AS i FROM {jobs}
      WHERE finished_at IS NOT NULL) AS f
  ON f.i = mod(g, (SELECT count(*) FROM {jobs} WHERE finished_at IS NOT NULL))
"""


def _fill_tally() -> None:
    """The tally as 20 kinds settled by many worker threads leave it: every run outcome
    of every kind on every shard."""
    from django_jobqueue.models import RunTally
    from django_jobqueue.store.monitoring import TALLY_SHARDS
    from django_jobqueue.store.statistics import _RUN_OUTCOMES

    RunTally.objects.bulk_create(
        RunTally(kind=f"shop.kind_{k}", outcome=str(outcome), shard=shard, runs=1000)
        for k in range(20)
        for outcome in _RUN_OUTCOMES
        for shard in range(TALLY_SHARDS)
    )


def _scrape_ms() -> float:
    from django_jobqueue.metrics import exposition

    exposition()  # warm-up: plans, caches
    times = []
    for _ in range(15):
        started = time.perf_counter()
        exposition()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.metrics_scrape", description=__doc__)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--jobs", type=int, default=100_000)
    p.add_argument("--journal", type=int, default=10_000_000)
    args = p.parse_args(argv)
    _ensure_database(args.database_url)
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from django_jobqueue.models import Job, JournalEntry, RunTally

    call_command("migrate", verbosity=0)
    names = {"jobs": Job._meta.db_table, "journal": JournalEntry._meta.db_table}
    with connections["default"].cursor() as cursor:
        cursor.execute(f"TRUNCATE {names['journal']}, {names['jobs']}, {RunTally._meta.db_table}")
        cursor.execute(JOBS_SQL.format(**names), {"n": args.jobs})
        _fill_tally()
        cursor.execute(f"ANALYZE {names['jobs']}")
        empty = _scrape_ms()
        started = time.monotonic()
        cursor.execute(JOURNAL_SQL.format(**names), {"n": args.journal})
        cursor.execute(f"ANALYZE {names['journal']}")
        print(f"filled {args.journal:,} journal entries in {time.monotonic() - started:.0f}s")
    full = _scrape_ms()
    ratio = full / empty
    print(f"scrape median: {empty:.1f} ms (empty journal), {full:.1f} ms ({args.journal:,})")
    print(f"ratio {ratio:.2f} (limit {LIMIT:.0f}x)")
    return 0 if ratio <= LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
