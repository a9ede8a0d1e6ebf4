"""The per-key measure (django_jobqueue only): issue 23's acceptance row. N no-ops over
100 keys drained by two workers unlimited, then the same jobs with per-key limits and
fairness on (``max_in_flight_per_key=2``, ``fair``, set at run time as ``set_limit``
sets them), each on a fresh database, in the same repetition: the ratio of the two
rates (target >= 0.7; River's global limit cost it 0.5).

The jobs are written by one INSERT (untimed, as the other drains' preloads), their keys
``tenant:0`` … ``tenant:99`` dealt round the jobs in order.

Beside the rates, what the database did in each drain, from its own counters
(``pg_stat_database``, read once the workers' connections have closed): jobs per
transaction committed (less the harness's polls: the workers' turns mostly, and their
heartbeats and upkeep, of which a longer drain has more) and shared buffers read per
job. They count work, not time: on a machine
busy with other work they still compare the two drains, where the rates, and their
ratio, swing with the load.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from bench.errors import BenchError
from bench.pg import other_backends
from bench.results import Measure, Rep, Row
from bench.systems import System
from bench.systems.jobqueue import NOOP_KIND

if TYPE_CHECKING:
    from bench.config import Sizes
    from bench.harness import Bench
    from bench.pg import Conn

KEYS = 100
WORKERS = 2
RULES = {"max_in_flight_per_key": 2, "fair": True}

KEYED_SQL = """
INSERT INTO django_jobqueue_job (
    id, kind, queue, payload, priority, status, created_at, visible_at,
    claimed_by, run_count, failure_count, carry, cancel_requested, cancel_actor, job_key
)
SELECT gen_random_uuid(), %(kind)s, 'default', '{}'::jsonb, 1, 'pending', now(),
       now() - interval '1 second' + g * interval '1 microsecond',
       '', 0, 0, '{}'::jsonb, false, '', 'tenant:' || (g %% %(keys)s)
FROM generate_series(1, %(count)s) AS g
"""
LIMIT_SQL = """
INSERT INTO django_jobqueue_kindlimit (
    kind, sets_max_in_flight, sets_rate_limit, rate_limit, per_key, changed_at, changed_by
) VALUES (%(kind)s, false, false, '', %(rules)s::jsonb, now(), 'bench')
"""


# The database's committed transactions and shared buffers read (hit or not) so far.
WORK_SQL = """
SELECT xact_commit, blks_hit + blks_read FROM pg_stat_database
WHERE datname = current_database()
"""


def _keyed_drain(b: Bench, s: System, n: int, *, limited: bool) -> tuple[float, float, float]:
    """The drain's rate, its jobs per transaction, and its buffers per job (see the
    module's docstring)."""
    with b.fresh(s) as db, b.server.connect(db) as conn:
        _fill(conn, n, limited=limited)
        commits, buffers = _work(conn)
        with b.workers(s, db, WORKERS) as procs:
            drained = b.drain(s, conn, n, procs)
        commits_after, buffers_after = _work(conn)
    turns = commits_after - commits - drained.polls
    return drained.rate, n / max(turns, 1), (buffers_after - buffers) / n


def _work(conn: Conn) -> tuple[int, int]:
    """``WORK_SQL`` once no other connection is left on the database (a backend reports
    its counts as it exits, and only about once a second while it runs)."""
    deadline = time.monotonic() + 10
    while other_backends(conn) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # the last one's report, sent as it exits
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(WORK_SQL).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _fill(conn: Conn, n: int, *, limited: bool) -> None:
    conn.execute(KEYED_SQL, {"kind": NOOP_KIND, "keys": KEYS, "count": n})
    if limited:
        conn.execute(LIMIT_SQL, {"kind": NOOP_KIND, "rules": json.dumps(RULES)})
    conn.execute("ANALYZE")
    conn.execute("CHECKPOINT")


def keyed_drain(b: Bench, s: System) -> Rep:
    n = b.sizes.drain
    unlimited, free_turns, free_buffers = _keyed_drain(b, s, n, limited=False)
    limited, turns, buffers = _keyed_drain(b, s, n, limited=True)
    if unlimited <= 0:
        raise BenchError("the unlimited keyed drain measured no rate")
    return Rep(
        {
            "unlimited": unlimited,
            "limited": limited,
            "ratio": limited / unlimited,
            "unlimited_jobs_per_turn": free_turns,
            "limited_jobs_per_turn": turns,
            "unlimited_buffers": free_buffers,
            "limited_buffers": buffers,
        },
        {"n": n, "keys": KEYS, "workers": WORKERS, "rules": RULES},
    )


def keyed_measures(sz: Sizes) -> tuple[Measure, ...]:
    return (
        Measure(
            "keyed_drain",
            (
                Row("unlimited", f"drain {sz.drain:,} over {KEYS} keys, unlimited (jobs/s)"),
                Row("limited", "the same, max_in_flight_per_key=2 and fair (jobs/s)"),
                Row("ratio", "per-key limits and fairness / unlimited (target >= 0.7)"),
                Row("unlimited_jobs_per_turn", "unlimited: jobs per transaction"),
                Row("limited_jobs_per_turn", "limited: jobs per transaction"),
                Row("unlimited_buffers", "unlimited: buffers read per job", lower_is_better=True),
                Row("limited_buffers", "limited: buffers read per job", lower_is_better=True),
            ),
            keyed_drain,
            applies=lambda s: s.has_workflows,  # django_jobqueue's own API only
        ),
    )
