"""The workflow measures (django_jobqueue only): issue 19's targets, each set beside the
plain-job figure of the same run, so that a ratio never compares two machines' moods.

- **Chord write**: one ``chord(members, callback).enqueue()`` of N no-op members (the
  signatures built inside the clock, as ``enqueue_many`` checks its items inside its
  own) against one ``enqueue_many`` of N plain no-ops, in the same agent process.
- **Chord drain**: N plain no-ops drained by two workers, then a chord of N no-op
  members on a fresh database, drained the same way; the ratio is chord ÷ plain
  (target ≥ 0.8). Each rate is timed by the jobs' own ``finished_at``: the jobs that
  finished after the first settlement over the time from it to the last. (Both drains
  last well under a second at two workers' rates, and the harness's count every 100 ms
  moved either rate by up to a sixth; the polled rates are kept in the JSON.) The
  callback is a stamp task: its start, less the last member's ``finished_at``, is the
  callback's start latency (target < 50 ms).
- **Chain**: a chain of stamp steps on one ready worker; each step's start less its
  previous step's ``finished_at`` is one step-to-step latency (target p50 < 5 ms).

Times on both sides of a latency come from the same host's clock: the worker's
``time.time()`` at a stamp, and the ``finished_at`` the settling worker wrote.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING

from bench.errors import BenchError
from bench.harness import wait_stamps
from bench.pg import Conn, scalar
from bench.results import Measure, Rep, Row
from bench.systems import System

if TYPE_CHECKING:
    from bench.config import Sizes
    from bench.harness import Bench

CALLBACK = "callback"  # the chord callback's stamp label
CHAIN_PREFIX = "c"  # a chain step's stamp label: "c<position>"
WORKERS = 2  # worker processes for the drains
PROXIED_CHAIN = 100  # steps of the chain whose statements are counted

MEMBERS_DONE = (
    "SELECT count(*) FROM django_jobqueue_job"
    " WHERE workflow_id IS NOT NULL AND status = 'completed' AND step_name <> %(callback)s"
)
LAST_MEMBER = (
    "SELECT extract(epoch FROM max(finished_at)) FROM django_jobqueue_job"
    " WHERE workflow_id IS NOT NULL AND step_name <> %(callback)s"
)
# Jobs finished after the first settlement of those ``where`` picks, and the seconds
# from that settlement to the last (a turn's settlements share one finished_at).
FINISH_SPAN = (
    "SELECT count(*) FILTER (WHERE j.finished_at > f.first),"
    " extract(epoch FROM max(j.finished_at) - min(f.first))"
    " FROM django_jobqueue_job AS j,"
    " (SELECT min(finished_at) AS first FROM django_jobqueue_job WHERE {where}) AS f"
    " WHERE {where}"
)
PLAIN_JOBS = "workflow_id IS NULL AND finished_at IS NOT NULL"
MEMBERS = "workflow_id IS NOT NULL AND finished_at IS NOT NULL AND step_name <> %(callback)s"
STEPS_OPEN = "SELECT count(*) FROM django_jobqueue_job WHERE status <> 'completed'"
STEP_FINISHES = (
    "SELECT step_name, extract(epoch FROM finished_at) FROM django_jobqueue_job"
    " WHERE workflow_id IS NOT NULL AND finished_at IS NOT NULL"
)


def chord_write(b: Bench, s: System) -> Rep:
    n = b.sizes.chord
    with b.fresh(s) as db:
        took = b.agent(s, db, "chord_write", n=n, callback=CALLBACK)
    chord, plain = float(took["chord"]), float(took["plain"])
    return Rep(
        {"chord": chord, "plain": plain, "ratio": chord / plain},
        {"n": n, "chord_seconds": chord, "enqueue_many_seconds": plain},
    )


def chord_drain(b: Bench, s: System) -> Rep:
    n = b.sizes.chord
    with b.fresh(s) as db, b.server.connect(db) as conn:
        plain = b.timed_drain(s, db, n, WORKERS)
        plain_rate = finish_rate(conn, PLAIN_JOBS, quick=b.config.quick)
    with b.fresh(s) as db, b.server.connect(db) as conn:
        b.agent(s, db, "preload_chord", n=n, callback=CALLBACK)
        if members_left(conn, n) != n:
            raise BenchError(f"after writing a chord of {n}, not all {n} members are open")
        conn.execute("ANALYZE")
        conn.execute("CHECKPOINT")
        stamp_file = b.workdir / f"{db}-stamps.txt"
        with b.workers(s, db, WORKERS, stamp_file=stamp_file) as procs:
            chord = b.drain(s, conn, n, procs, remaining=members_left)
            started = b.wait_stamps(stamp_file, {CALLBACK}, procs)[CALLBACK]
            last = float(scalar(conn, LAST_MEMBER, {"callback": CALLBACK}))
            members_rate = finish_rate(conn, MEMBERS, quick=b.config.quick)
    latency = (started - last) * 1000
    return Rep(
        {
            "members": members_rate,
            "plain": plain_rate,
            "ratio": members_rate / plain_rate,
            "callback_ms": latency,
        },
        {
            "n": n,
            "workers": WORKERS,
            "chord": chord.raw(),
            "plain": plain.raw(),
            "polled_ratio": chord.rate / plain.rate if chord.seconds and plain.seconds else None,
        },
    )


def finish_rate(conn: Conn, where: str, *, quick: bool) -> float:
    """Jobs a second from the first settlement of those ``where`` picks to the last, by
    their ``finished_at`` (see the module docstring); NaN in the quick form when one
    settlement took them all (it checks that the measure runs, not its rate)."""
    params = {"callback": CALLBACK} if "%(callback)s" in where else None
    row = conn.execute(FINISH_SPAN.format(where=where), params).fetchone()
    done, seconds = row if row is not None else (0, 0)
    if not done or not seconds:
        if quick:
            return math.nan
        raise BenchError("the drain settled all its jobs at once: no span to time")
    return float(done) / float(seconds)


def members_left(conn: Conn, n: int) -> int:
    """Of a chord's ``n`` members, how many have not completed (its callback aside)."""
    return n - int(scalar(conn, MEMBERS_DONE, {"callback": CALLBACK}))


def chain_latency(b: Bench, s: System) -> Rep:
    n = b.sizes.chain
    with b.fresh(s) as db, b.server.connect(db) as conn:
        stamp_file = b.workdir / f"{db}-stamps.txt"
        with b.workers(s, db, 1, stamp_file=stamp_file) as procs:
            b.wait_ready(s, conn, procs)
            b.agent(s, db, "enqueue_chain", n=n, prefix=CHAIN_PREFIX)
            labels = {f"{CHAIN_PREFIX}{i}" for i in range(n)}
            started = wait_stamps([stamp_file], labels, procs, timeout=30.0 + n * 0.1)
        finishes = {str(name): float(at) for name, at in conn.execute(STEP_FINISHES).fetchall()}
    gaps = [
        (started[f"{CHAIN_PREFIX}{i}"] - finishes[str(i - 1)]) * 1000
        for i in range(1, n)
        if str(i - 1) in finishes
    ]
    if len(gaps) != n - 1:
        raise BenchError(f"{n - 1 - len(gaps)} chain steps have no finish time")
    cuts = statistics.quantiles(gaps, n=100, method="inclusive")
    per_step, counted = chain_statements(b, s, min(n, PROXIED_CHAIN))
    return Rep(
        {"p50": cuts[49], "p95": cuts[94], "max": max(gaps), "statements": per_step},
        {"n": n, "gaps_ms": gaps, "proxied": counted},
    )


def chain_statements(b: Bench, s: System, n: int) -> tuple[float, dict[str, float]]:
    """Statements one worker sends per chain step (through the counting proxy, on a
    chain of its own: the proxy's hop would slow the timed one), idle polling during
    the chain included."""
    proxy = b.proxy()
    with b.fresh(s) as db, b.server.connect(db) as conn:
        stamp_file = b.workdir / f"{db}-stamps.txt"
        with b.workers(s, db, 1, proxied=True, stamp_file=stamp_file) as procs:
            b.wait_ready(s, conn, procs)
            proxy.reset()
            b.agent(s, db, "enqueue_chain", n=n, prefix=CHAIN_PREFIX)
            last = {f"{CHAIN_PREFIX}{n - 1}"}
            wait_stamps([stamp_file], last, procs, timeout=30.0 + n * 0.1)
            while scalar(conn, STEPS_OPEN) > 0:  # the last step's settlement, too
                time.sleep(0.01)
            counts = proxy.counts()
    return counts.statements / n, {"n": n, "Q": counts.query, "E": counts.execute}


def workflow_measures(sz: Sizes) -> tuple[Measure, ...]:
    def applies(s: System) -> bool:
        return s.has_workflows

    return (
        Measure(
            "chord_write",
            (
                Row("chord", f"write a chord of {sz.chord:,} members, one call (s)", True),
                Row("plain", f"enqueue_many of {sz.chord:,} plain jobs, same run (s)", True),
                Row("ratio", "chord write / enqueue_many", True),
            ),
            chord_write,
            applies=applies,
        ),
        Measure(
            "chord_drain",
            (
                Row("members", f"drain a chord's {sz.chord:,} members, {WORKERS} workers (jobs/s)"),
                Row("plain", f"drain {sz.chord:,} plain jobs, {WORKERS} workers (jobs/s)"),
                Row("ratio", "chord members / plain jobs (target >= 0.8)"),
                Row("callback_ms", "chord callback start after last member (ms, < 50)", True),
            ),
            chord_drain,
            applies=applies,
        ),
        Measure(
            "chain",
            (
                Row("p50", f"{sz.chain:,}-step chain, step to step p50 (ms, < 5)", True),
                Row("p95", "chain step to step p95 (ms)", True),
                Row("max", "chain step to step max (ms)", True),
                Row("statements", "statements per chain step, 1 worker", True),
            ),
            chain_latency,
            applies=applies,
        ),
    )
