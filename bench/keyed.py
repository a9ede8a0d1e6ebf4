"""The per-key measure (django_jobqueue only): issue 23's acceptance row. N no-ops over
100 keys drained by two workers unlimited, then the same jobs with per-key limits and
fairness on (``max_in_flight_per_key=2``, ``fair``, set at run time as ``set_limit``
sets them), each on a fresh database, in the same repetition: the ratio of the two
rates (target >= 0.7; River's global limit cost it 0.5).

The jobs are written by one INSERT (untimed, as the other drains' preloads), their keys
``tenant:0`` … ``tenant:99`` dealt round the jobs in order.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from bench.errors import BenchError
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


def _keyed_drain(b: Bench, s: System, n: int, *, limited: bool) -> float:
    with b.fresh(s) as db, b.server.connect(db) as conn:
        _fill(conn, n, limited=limited)
        with b.workers(s, db, WORKERS) as procs:
            return b.drain(s, conn, n, procs).rate


def _fill(conn: Conn, n: int, *, limited: bool) -> None:
    conn.execute(KEYED_SQL, {"kind": NOOP_KIND, "keys": KEYS, "count": n})
    if limited:
        conn.execute(LIMIT_SQL, {"kind": NOOP_KIND, "rules": json.dumps(RULES)})
    conn.execute("ANALYZE")
    conn.execute("CHECKPOINT")


def keyed_drain(b: Bench, s: System) -> Rep:
    n = b.sizes.drain
    unlimited = _keyed_drain(b, s, n, limited=False)
    limited = _keyed_drain(b, s, n, limited=True)
    if unlimited <= 0:
        raise BenchError("the unlimited keyed drain measured no rate")
    return Rep(
        {"unlimited": unlimited, "limited": limited, "ratio": limited / unlimited},
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
            ),
            keyed_drain,
            applies=lambda s: s.has_workflows,  # django_jobqueue's own API only
        ),
    )
