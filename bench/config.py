"""A run's settings: the sizes of the full and quick forms, and what the CLI chose."""

from __future__ import annotations

from dataclasses import dataclass

from bench.pg import Server
from bench.systems import System


@dataclass(frozen=True)
class Sizes:
    enqueue: int = 2_000
    bulk: int = 50_000
    drain: int = 20_000
    pickups: int = 200
    pickup_gap: float = 0.02
    big_total: int = 1_000_000  # pending rows in the big-table drain...
    big_runnable: int = 10_000  # ...of which this many are runnable
    proxied: int = 5_000  # jobs drained through the counting proxy
    idle_seconds: float = 3.0  # how long an idle worker is counted
    poll: float = 0.1  # seconds between counts during a drain (see the module docstring)
    chord: int = 10_000  # members of the workflow measures' chord (bench/workflows.py)
    chain: int = 1_000  # steps of their chain
    steps: int = 2_000  # ten-step jobs of the durable-steps measure (bench/steps.py)
    # Once a worker has connected, this long more for it to finish starting.
    ready_settle: float = 2.0
    # The workload measures (bench/workloads.py):
    io_jobs: int = 5_000  # jobs of the I/O-bound drains...
    io_ms: int = 50  # ...each waiting this long
    cpu_jobs: int = 1_000  # jobs of the CPU-bound drain...
    cpu_ms: int = 20  # ...each this much CPU time of pure Python
    spin_seconds: float = 2.0  # each segment of the machine's own scaling beside it
    many_async: int = 10_000  # async jobs at once in one worker process...
    many_async_ms: int = 5_000  # ...each waiting this long


FULL = Sizes()
QUICK = Sizes(
    enqueue=100,
    bulk=1_000,
    drain=400,
    pickups=15,
    big_total=10_000,
    big_runnable=1_000,
    proxied=200,
    idle_seconds=1.0,
    chord=400,
    chain=30,
    steps=100,
    ready_settle=0.5,
    io_jobs=4_000,  # fewer drain before the first poll after the enqueue returns
    # 40 per segment (with the untimed fallback when a segment drains before the first
    # poll): the quick form checks that the measure runs; 200 and 2 s spins took about a
    # quarter of the quick run's CPU.
    cpu_jobs=80,
    spin_seconds=0.5,
    many_async=1_000,
    many_async_ms=2_000,
    # Small drains finish in a few hundred milliseconds: count often enough to time them
    # (the quick run checks that every measure runs, not how fast).
    poll=0.02,
)


@dataclass(frozen=True)
class Config:
    sizes: Sizes
    reps: int
    concurrency: int
    systems: tuple[System, ...]
    server: Server
    quick: bool
    only_measures: frozenset[str] = frozenset()  # run only these measures (empty: all)
