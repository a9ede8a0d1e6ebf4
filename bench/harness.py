"""The measures, each run per system and repetition on a freshly created database.

A system is installed once per run into a template database (its migrations, or
pgqueuer's schema); every repetition of every measure then gets its own
``CREATE DATABASE bench_<slug>_<run>_<n> TEMPLATE bench_<slug>_<run>_template`` and
drops it afterwards, so no measure sees another's rows and none pays for migrating.
``<run>`` is the harness's pid, so that two runs at once do not drop each other's
databases.

Jobs preloaded for a drain are followed by ``ANALYZE``: the planner then has the
statistics autovacuum would have gathered on a table in use (and this server may run
with autovacuum off, which the report shows). Just before the workers start, a
``CHECKPOINT`` flushes what the preload and earlier measures left dirty, so that no
checkpoint of theirs lands in the middle of a drain.

Drains are timed from outside, the same way for all systems: the harness polls the
database every 100 ms for the jobs not yet done; the clock starts at the first poll
that sees fewer than N left and stops at the first that sees none, and the rate is
the jobs done in between over that time. Worker start-up is thus never timed. The
poll is slow on purpose: a count every 20 ms took a tenth of a core from the
systems under test on two cores; the last poll's lateness (at most 100 ms) makes
every rate a slight underestimate, the same for all.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import statistics
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import BenchError
from bench.pg import Conn, Server, other_backends
from bench.procs import Worker, child_env, run_agent
from bench.proxy import CountingProxy
from bench.stamps import ENV as STAMP_ENV
from bench.stamps import read_stamps
from bench.systems import System

STALL = 60.0  # seconds without progress before a drain is declared stuck
READY_TIMEOUT = 60.0  # seconds for a worker to connect (and LISTEN, where it does)
STAMP_TIMEOUT = 30.0  # seconds after the last enqueue for every stamp job to have started
AGENT_TIMEOUT = 1800.0
WARMUP_STAMPS = 5  # stamp jobs enqueued (and ignored) before the measured ones


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
    cpu_jobs=200,  # 100 per segment: fewer drained before the first poll
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


@dataclass
class Rep:
    """One repetition: the numbers the table shows, and everything behind them."""

    values: dict[str, float]
    raw: dict[str, Any]


@dataclass
class Outcome:
    """One system's repetitions of one measure, or why they stopped."""

    reps: list[Rep] = field(default_factory=list)
    error: BenchError | None = None


@dataclass(frozen=True)
class Drained:
    n: int
    counted: int  # jobs done between the clock's start and stop
    seconds: float
    polls: int

    @property
    def rate(self) -> float:
        return self.counted / self.seconds

    def raw(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "counted": self.counted,
            "seconds": self.seconds,
            "polls": self.polls,
            **({"rate": self.rate} if self.seconds else {}),  # an untimed drain has none
        }


class Bench:
    """One run's shared state: the server, a folder for logs, the proxy, database names."""

    def __init__(self, config: Config, workdir: Path) -> None:
        self.config = config
        self.sizes = config.sizes
        self.server = config.server
        self.workdir = workdir
        self.run_id = os.getpid()
        self._numbers = itertools.count(1)
        self._proxy: CountingProxy | None = None
        self._templates: list[str] = []

    def template(self, system: System) -> str:
        return f"bench_{system.slug}_{self.run_id}_template"

    def install(self, system: System) -> None:
        name = self.template(system)
        self.server.create(name)
        self._templates.append(name)
        self.agent(system, name, "install")

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()
        for name in self._templates:
            self.server.drop(name)

    def proxy(self) -> CountingProxy:
        if self._proxy is None:
            self._proxy = CountingProxy(self.server.host, self.server.port)
            self._proxy.start()
        return self._proxy

    @contextlib.contextmanager
    def fresh(self, system: System) -> Iterator[str]:
        """A new database from the system's template, dropped on the way out."""
        name = f"bench_{system.slug}_{self.run_id}_{next(self._numbers)}"
        self.server.create(name, template=self.template(system))
        try:
            yield name
        finally:
            self.server.drop(name)

    def agent(
        self, system: System, db: str, action: str, env: dict[str, str] | None = None, **params: Any
    ) -> Any:
        return run_agent(system, self.server.url(db), action, params, AGENT_TIMEOUT, env)

    def preload(self, system: System, db: str, conn: Conn, n: int) -> None:
        """Enqueue ``n`` no-ops the system's fastest way (untimed), check, ANALYZE."""
        self.agent(system, db, "preload", n=n)
        left = system.remaining(conn, n)
        if left != n:
            raise BenchError(f"after preloading {n} jobs, {left} are pending")
        conn.execute("ANALYZE")

    @contextlib.contextmanager
    def workers(
        self,
        system: System,
        db: str,
        count: int,
        *,
        proxied: bool = False,
        stamp_file: Path | None = None,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> Iterator[list[Worker]]:
        """``count`` worker processes on ``db`` (through the counting proxy if ``proxied``);
        ``argv`` instead of the system's own command line, ``env`` added to theirs."""
        url = (
            self.server.url(db, port=self.proxy().port, sslmode="disable")
            if proxied
            else self.server.url(db)
        )
        extra = {**(env or {}), **({STAMP_ENV: str(stamp_file)} if stamp_file else {})}
        env = child_env(system, url, extra)
        argv = argv or system.worker_argv(self.config.concurrency)
        started: list[Worker] = []
        try:
            for i in range(count):
                started.append(Worker(argv, env, self.workdir / f"{db}-worker{i}.log"))
            yield started
        finally:
            for worker in started:
                worker.stop()

    def wait_ready(self, system: System, conn: Conn, workers: list[Worker]) -> None:
        """Until the workers are connected (and LISTENing, for a system whose LISTEN
        shows in pg_stat_activity), then ``ready_settle`` more seconds."""
        deadline = time.monotonic() + READY_TIMEOUT
        prefix = system.listen_prefix
        while True:
            queries = other_backends(conn)
            if queries and (prefix is None or any(q.startswith(prefix) for q in queries)):
                break
            _check_alive(workers, "while starting")
            if time.monotonic() > deadline:
                raise BenchError(
                    f"worker not ready within {READY_TIMEOUT:.0f} s", _describe(workers)
                )
            time.sleep(0.05)
        time.sleep(self.sizes.ready_settle)

    def drain(
        self,
        system: System,
        conn: Conn,
        n: int,
        workers: list[Worker],
        *,
        timed: bool = True,
        remaining: Callable[[Conn, int], int] | None = None,
        watch: Callable[[], None] | None = None,
    ) -> Drained:
        """Poll until the ``n`` jobs are done; see the module docstring for the clock.

        ``timed=False``: only wait for them (a drain that is counted, not timed, may
        finish between two polls). ``remaining``: count the jobs left this way instead
        of ``system.remaining`` (a chord's members, not its callback). ``watch``: called
        after each poll (the workload measures sample the workers' memory there)."""
        count = remaining or system.remaining
        start: float | None = None
        counted = polls = 0
        last_left, last_change = n, time.monotonic()
        next_poll = time.monotonic()
        while True:
            left = count(conn, n)
            now = time.monotonic()
            polls += 1
            if watch is not None:
                watch()
            if left != last_left:
                last_left, last_change = left, now
            if start is None and left < n:
                if left <= 0:
                    if not timed:
                        return Drained(n=n, counted=n, seconds=0.0, polls=polls)
                    raise BenchError(f"{n} jobs drained between two polls: too few to time")
                start, counted = now, left
            elif start is not None and left <= 0:
                return Drained(n=n, counted=counted, seconds=now - start, polls=polls)
            _check_alive(workers, f"with {left} of {n} jobs left")
            if now - last_change > STALL:
                raise BenchError(
                    f"no progress for {STALL:.0f} s with {left} of {n} jobs left",
                    _describe(workers),
                )
            next_poll += self.sizes.poll
            delay = next_poll - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_poll = time.monotonic()

    def timed_drain(
        self,
        system: System,
        db: str,
        n: int,
        workers: int,
        before: Callable[[Conn], None] | None = None,
    ) -> Drained:
        """Preload ``n`` jobs (untimed), optionally ``before(conn)``, then drain them."""
        with self.server.connect(db) as conn:
            self.preload(system, db, conn, n)
            if before is not None:
                before(conn)
            # Flush what the preload (and the measures before) left dirty, so that no
            # checkpoint of theirs lands in this drain and slows its commits.
            conn.execute("CHECKPOINT")
            with self.workers(system, db, workers) as procs:
                return self.drain(system, conn, n, procs)

    def wait_stamps(self, path: Path, labels: set[str], workers: list[Worker]) -> dict[str, float]:
        deadline = time.monotonic() + STAMP_TIMEOUT
        while True:
            stamps = read_stamps(path)
            missing = labels - set(stamps)
            if not missing:
                return stamps
            _check_alive(workers, f"with {len(missing)} stamp jobs not started")
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{len(missing)} of {len(labels)} stamp jobs never started",
                    _describe(workers),
                )
            time.sleep(0.05)


def _describe(workers: list[Worker]) -> str:
    return "\n\n".join(worker.describe() for worker in workers)


def _check_alive(workers: list[Worker], when: str) -> None:
    for worker in workers:
        if not worker.alive():
            raise BenchError(f"a worker exited {when}", worker.describe())


# --- the measures ---------------------------------------------------------------------------


def enqueue_each(b: Bench, s: System) -> Rep:
    n = b.sizes.enqueue
    with b.fresh(s) as db:
        seconds = float(b.agent(s, db, "enqueue_each", n=n))
    return Rep({"rate": n / seconds}, {"n": n, "seconds": seconds})


def enqueue_bulk(b: Bench, s: System) -> Rep:
    n = b.sizes.bulk
    with b.fresh(s) as db:
        seconds = float(b.agent(s, db, "enqueue_bulk", n=n))
    return Rep({"rate": n / seconds}, {"n": n, "seconds": seconds})


def drain_with(workers: int) -> Callable[[Bench, System], Rep]:
    def drain(b: Bench, s: System) -> Rep:
        with b.fresh(s) as db:
            drained = b.timed_drain(s, db, b.sizes.drain, workers)
        return Rep({"rate": drained.rate}, {**drained.raw(), "workers": workers})

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
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return Rep(
        {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98]},
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


# --- what runs, in what order ---------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of the table: a value of a measure's repetitions."""

    value: str
    label: str
    lower_is_better: bool = False


def _always(system: System) -> bool:
    return True


@dataclass(frozen=True)
class Measure:
    key: str
    rows: tuple[Row, ...]
    run: Callable[[Bench, System], Rep]
    applies: Callable[[System], bool] = _always


def measures(sz: Sizes) -> tuple[Measure, ...]:
    from bench.keyed import keyed_measures  # they build on this module's types
    from bench.steps import steps_measures
    from bench.workflows import workflow_measures
    from bench.workloads import workload_measures

    return (
        Measure(
            "enqueue_each",
            (Row("rate", f"enqueue, 1 tx per job, N={sz.enqueue:,} (jobs/s)"),),
            enqueue_each,
        ),
        Measure(
            "enqueue_bulk",
            (Row("rate", f"bulk enqueue, N={sz.bulk:,} (jobs/s)"),),
            enqueue_bulk,
            applies=lambda s: s.has_bulk,
        ),
        Measure(
            "drain_1",
            (Row("rate", f"drain {sz.drain:,} no-ops, 1 worker (jobs/s)"),),
            drain_with(1),
        ),
        Measure(
            "drain_2",
            (Row("rate", f"drain {sz.drain:,} no-ops, 2 workers (jobs/s)"),),
            drain_with(2),
        ),
        Measure(
            "statements",
            (
                Row("per_job", f"statements per job, drain {sz.proxied:,}, 1 worker", True),
                Row("idle_per_s", "statements per second, idle worker", True),
            ),
            statements,
        ),
        Measure(
            "pickup_latency",
            (
                Row("p50", f"pickup latency p50, {sz.pickups} jobs (ms)", True),
                Row("p95", "pickup latency p95 (ms)", True),
                Row("p99", "pickup latency p99 (ms)", True),
            ),
            pickup_latency,
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


Results = dict[str, dict[str, Outcome | None]]  # system key -> measure key -> outcome


def _as_bench_error(exc: Exception) -> BenchError:
    if isinstance(exc, BenchError):
        return exc
    return BenchError(f"{type(exc).__name__}: {exc}", traceback.format_exc())


def run(config: Config, bench: Bench, progress: Callable[[str], None]) -> Results:
    """Every measure, repetition by repetition, the systems taking turns (so that a
    drift of the machine spreads over all of them). A failed repetition ends that
    system's measure; the others go on."""
    results: Results = {s.key: {} for s in config.systems}
    broken: dict[str, BenchError] = {}
    for s in config.systems:
        progress(f"{s.key}: installing into {bench.template(s)}")
        try:
            bench.install(s)
        except Exception as exc:
            broken[s.key] = _as_bench_error(exc)
            progress(f"{s.key}: install failed: {broken[s.key]}")
    for m in measures(config.sizes):
        if config.only_measures and m.key not in config.only_measures:
            continue
        for s in config.systems:
            results[s.key][m.key] = Outcome() if m.applies(s) else None
        for rep in range(1, config.reps + 1):
            for s in config.systems:
                outcome = results[s.key][m.key]
                if outcome is None or outcome.error is not None:
                    continue
                if s.key in broken:
                    cause = broken[s.key]
                    outcome.error = BenchError(f"install failed: {cause}", cause.detail)
                    continue
                started = time.monotonic()
                try:
                    outcome.reps.append(m.run(bench, s))
                except Exception as exc:
                    outcome.error = _as_bench_error(exc)
                took = time.monotonic() - started
                said = (
                    f"ERROR {outcome.error}"
                    if outcome.error is not None
                    else ", ".join(f"{k}={v:.4g}" for k, v in outcome.reps[-1].values.items())
                )
                progress(f"[{m.key} rep {rep}/{config.reps}] {s.key}: {said} ({took:.1f} s)")
    return results
