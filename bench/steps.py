"""The durable-steps measure (django_jobqueue only, issue 22): what a step's record
costs. N jobs of ten memoized no-op steps each (``ctx.step``: one guarded UPDATE per
step) drained by one worker, beside ten times N plain no-ops drained the same way in
the same run; the ratio is a ten-step job's time over ten plain jobs' time (below 1: a
step costs less than a job of its own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.errors import BenchError
from bench.results import Measure, Rep, Row
from bench.systems import System

if TYPE_CHECKING:
    from bench.config import Sizes
    from bench.harness import Bench

STEPS = 10  # steps per job (bench.benchapp.tasks.ten_steps)


def ten_steps(b: Bench, s: System) -> Rep:
    n = b.sizes.steps
    with b.fresh(s) as db:
        plain = b.timed_drain(s, db, n * STEPS, 1)
    with b.fresh(s) as db, b.server.connect(db) as conn:
        b.agent(s, db, "preload_steps", n=n)
        if s.remaining(conn, n) != n:
            raise BenchError(f"after preloading {n} ten-step jobs, not all are pending")
        conn.execute("ANALYZE")
        conn.execute("CHECKPOINT")
        with b.workers(s, db, 1) as procs:
            stepped = b.drain(s, conn, n, procs)
    return Rep(
        {
            "jobs": stepped.rate,
            "plain": plain.rate,
            "ratio": plain.rate / (STEPS * stepped.rate),
        },
        {"n": n, "steps": STEPS, "stepped": stepped.raw(), "plain": plain.raw()},
    )


def steps_measures(sz: Sizes) -> tuple[Measure, ...]:
    return (
        Measure(
            "ten_steps",
            (
                Row("jobs", f"drain {sz.steps:,} jobs of {STEPS} steps, 1 worker (jobs/s)"),
                Row("plain", f"drain {sz.steps * STEPS:,} plain jobs, 1 worker (jobs/s)"),
                Row("ratio", f"a {STEPS}-step job / {STEPS} plain jobs (time)", True),
            ),
            ten_steps,
            applies=lambda s: s.has_workflows,
        ),
    )
