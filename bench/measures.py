"""The core measures (enqueue, drain, statements, pickup latency, big table), and the
list of every measure in the order a run takes them."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

from bench.config import Sizes
from bench.harness import WARMUP_STAMPS, Bench
from bench.keyed import keyed_measures
from bench.limit import limit_measures
from bench.pg import Conn
from bench.results import Measure, Rep, Row, phase_rows
from bench.steps import steps_measures
from bench.systems import System
from bench.workflows import workflow_measures
from bench.workloads import workload_measures


def enqueue_each(b: Bench, s: System) -> Rep:
    n = b.sizes.enqueue
    with b.fresh(s) as db:
        seconds = float(b.agent(s, db, "enqueue_each", n=n))
    return Rep({"rate": n / seconds}, {"n": n, "seconds": seconds})


# The Django setting each row of enqueue_request runs at (BENCH_CONN_MAX_AGE).
CONN_MAX_AGES = {"conn0": "0", "persistent": "none"}


def enqueue_request(b: Bench, s: System) -> Rep:
    """One enqueue per simulated web request, at Django's default ``CONN_MAX_AGE`` (0: a
    connection opened and closed per request) and with persistent connections."""
    n = b.sizes.enqueue
    values: dict[str, float] = {}
    raw: dict[str, object] = {"n": n}
    with b.fresh(s) as db:
        for name, age in CONN_MAX_AGES.items():
            env = {"BENCH_CONN_MAX_AGE": age}
            seconds = float(b.agent(s, db, "enqueue_requests", env, n=n))
            values[name] = n / seconds
            raw[name] = {"seconds": seconds, "conn_max_age": age}
    return Rep(values, raw)


def enqueue_bulk(b: Bench, s: System) -> Rep:
    n = b.sizes.bulk
    with b.fresh(s) as db:
        seconds = float(b.agent(s, db, "enqueue_bulk", n=n))
    return Rep({"rate": n / seconds}, {"n": n, "seconds": seconds})


def drain_with(workers: int) -> Callable[[Bench, System], Rep]:
    def drain(b: Bench, s: System) -> Rep:
        with b.fresh(s) as db:
            drained = b.timed_drain(s, db, b.sizes.drain, workers)
        return Rep(drained.values(), {**drained.raw(), "workers": workers})

    return drain


def statements(b: Bench, s: System) -> Rep:
    """Statements a worker sends: idle (per second), then per job over a drain.

    The drain's count is everything the worker sent from its start until the last
    job was seen done, idle polling included: nothing is subtracted.
    """
    proxy = b.proxy()
    n = b.sizes.proxied
    with b.fresh(s) as db, b.server.connect(db) as conn:
        with b.workers(s, db, 1, proxied=True) as procs:
            b.wait_ready(s, conn, procs)
            proxy.reset()
            start = time.monotonic()
            time.sleep(b.sizes.idle_seconds)
            idle, idle_seconds = proxy.counts(), time.monotonic() - start
        b.preload(s, db, conn, n)
        proxy.reset()
        with b.workers(s, db, 1, proxied=True) as procs:
            drained = b.drain(s, conn, n, procs, timed=False)
            busy = proxy.counts()
    return Rep(
        {"per_job": busy.statements / n, "idle_per_s": idle.statements / idle_seconds},
        {
            "n": n,
            "drain": {"Q": busy.query, "E": busy.execute, **drained.raw()},
            "idle": {"Q": idle.query, "E": idle.execute, "seconds": idle_seconds},
        },
    )


def percentiles(latencies: Sequence[float]) -> dict[str, float]:
    """A pickup's p50, p95 and p99, in the unit of ``latencies``."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}


def pickup_latency(b: Bench, s: System) -> Rep:
    sz = b.sizes
    with b.fresh(s) as db, b.server.connect(db) as conn:
        stamp_file = b.workdir / f"{db}-stamps.txt"
        with b.workers(s, db, 1, stamp_file=stamp_file) as procs:
            b.wait_ready(s, conn, procs)
            committed: dict[str, float] = b.agent(
                s, db, "stamp_series", count=sz.pickups, gap=sz.pickup_gap, warmup=WARMUP_STAMPS
            )
            started = b.wait_stamps(stamp_file, set(committed), procs)
    latencies = [(started[label] - at) * 1000 for label, at in committed.items()]
    return Rep(
        percentiles(latencies),
        {"n": len(latencies), "gap_s": sz.pickup_gap, "latencies_ms": latencies},
    )


def big_table(b: Bench, s: System) -> Rep:
    """The same drain alone and among filler rows no worker may take yet."""
    sz = b.sizes
    with b.fresh(s) as db:
        small = b.timed_drain(s, db, sz.big_runnable, 1)
    filler: dict[str, float] = {}

    def pad(conn: Conn) -> None:
        start = time.perf_counter()
        s.add_filler(conn, total_pending=sz.big_total, runnable=sz.big_runnable)
        filler["seconds"] = time.perf_counter() - start

    with b.fresh(s) as db:
        big = b.timed_drain(s, db, sz.big_runnable, 1, before=pad)
    return Rep(
        {"big": big.rate, "small": small.rate, "ratio": big.rate / small.rate},
        {
            "total_pending": sz.big_total,
            "filler_seconds": filler["seconds"],
            "small": small.raw(),
            "big": big.raw(),
        },
    )


def measures(sz: Sizes) -> tuple[Measure, ...]:
    return (
        Measure(
            "enqueue_each",
            (Row("rate", f"enqueue, 1 tx per job, N={sz.enqueue:,} (jobs/s)"),),
            enqueue_each,
            limit=True,
        ),
        Measure(
            "enqueue_request",
            (
                Row("conn0", "enqueue, 1 per request, CONN_MAX_AGE=0 (Django's default)"),
                Row("persistent", "enqueue, 1 per request, CONN_MAX_AGE=None (persistent)"),
            ),
            enqueue_request,
            applies=lambda s: s.settings_module is not None or s.is_limit,
            limit=True,
            # The backend's enqueue path is measured by enqueue_each; one Django peer.
            quick_systems=frozenset({"django_jobqueue", "django-tasks-db", "limit"}),
        ),
        Measure(
            "enqueue_bulk",
            (Row("rate", f"bulk enqueue, N={sz.bulk:,} (jobs/s)"),),
            enqueue_bulk,
            applies=lambda s: s.has_bulk,
            limit=True,
        ),
        Measure(
            "drain_1",
            (Row("rate", f"drain {sz.drain:,} no-ops, 1 worker (jobs/s)"), *phase_rows()),
            drain_with(1),
        ),
        Measure(
            "drain_2",
            (Row("rate", f"drain {sz.drain:,} no-ops, 2 workers (jobs/s)"), *phase_rows()),
            drain_with(2),
            # drain_1's code path with a second worker: the quick form runs it for ours
            # and pgqueuer only (two more runs of workers at full speed, django-tasks-db's
            # polling at interval 0, for no code path that drain_1 did not run).
            quick_systems=frozenset({"django_jobqueue", "pgqueuer"}),
        ),
        *limit_measures(sz),
        Measure(
            "statements",
            (
                Row("per_job", f"statements per job, drain {sz.proxied:,}, 1 worker", True),
                Row("idle_per_s", "statements per second, idle worker", True),
            ),
            statements,
            applies=lambda s: s.uses_postgres,
            # The backend's worker is ours: its statements are drain_1's of ours.
            quick_systems=frozenset({"django_jobqueue", "django-tasks-db", "pgqueuer"}),
        ),
        Measure(
            "pickup_latency",
            (
                Row("p50", f"pickup latency p50, {sz.pickups} jobs (ms)", True),
                Row("p95", "pickup latency p95 (ms)", True),
                Row("p99", "pickup latency p99 (ms)", True),
            ),
            pickup_latency,
            limit=True,
        ),
        Measure(
            "big_table",
            (
                Row(
                    "big",
                    f"drain {sz.big_runnable:,} among {sz.big_total:,} pending, 1 worker (jobs/s)",
                ),
                Row("small", f"drain {sz.big_runnable:,} alone, 1 worker (jobs/s)"),
                Row("ratio", "big table / alone"),
            ),
            big_table,
            applies=lambda s: s.has_big_table,
        ),
        *workflow_measures(sz),
        *steps_measures(sz),
        *workload_measures(sz),
        *keyed_measures(sz),
    )
