"""The workload measures (issue 20): how the workers do at their defaults, at the documented
concurrencies, on I/O-bound and CPU-bound work, each rate beside the workers' peak memory.

- **drain_defaults**: N no-ops, two ``runworker`` processes with no option at all, beside
  two pgqueuer workers at its defaults.
- **drain_best**: the same at ``--concurrency BEST_CONCURRENCY`` (the best concurrency
  the docs give for short jobs), pgqueuer at its defaults again, in the same run.
- **io_sync**: ``io_jobs`` sync jobs each blocking ``io_ms`` (a sync HTTP call), two
  workers at ``--concurrency IO_CONCURRENCY`` (the docs' figure for I/O-bound sync tasks);
  pgqueuer's async entrypoint awaiting as long, at its defaults.
- **io_async**: the same jobs as ``async def``, two workers, on the event loop at
  ``--async-concurrency ASYNC_CONCURRENCY`` (the docs' figure for I/O-bound async
  tasks); pgqueuer as above.
- **cpu** (ours): jobs each using ``cpu_ms`` of CPU in pure Python, drained by one
  ``runworker --processes 1`` and by one ``--processes 2`` (``CPU_CONCURRENCY`` threads
  per process, as the docs say for CPU-bound work) in four segments of half of
  ``cpu_jobs``, in the order 1, 2, 2, 1, each on a fresh database, its workers started
  on its preloaded jobs: beside the polled rate, the whole run (start-up included).
- **many_async** (ours): ``many_async`` async jobs each waiting ``many_async_ms``, one
  worker process with ``--async-concurrency`` as high; how many ran at once at most and
  the process's most threads show that no job had a thread.

Memory is each worker process's peak resident set (``VmHWM`` in ``/proc``; a supervisor's
children included), read at every poll of the drain: the row gives the largest. Every
workload worker but the defaults' claims only its measure's kind (``--kind``): a worker that
knows an ``async def`` kind runs an event loop and claims for it too.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.errors import BenchError
from bench.harness import READY_TIMEOUT
from bench.pg import Conn, scalar
from bench.procs import Worker
from bench.results import Measure, Rep, Row, phase_rows
from bench.systems import System

if TYPE_CHECKING:
    from bench.config import Sizes
    from bench.harness import Bench

OURS = "django_jobqueue"
PGQ = "pgqueuer"
WORKERS = 2  # worker processes (runworker or pgqueuer) of the drains
BEST_CONCURRENCY = 32  # docs/explanation/performance.md: short jobs
IO_CONCURRENCY = 250  # docs/howto/running-workers.md: I/O-bound sync tasks
ASYNC_CONCURRENCY = 250  # docs/howto/running-workers.md: I/O-bound async tasks
CPU_CONCURRENCY = 2  # threads per process for CPU-bound work (the docs: 1-2)
ORDER = (1, 2, 2, 1)  # the CPU drain's --processes, each segment on half the jobs
SPIN = """
import sys, time
end, n = time.monotonic() + float(sys.argv[1]), 0
while time.monotonic() < end:
    for i in range(10_000):
        n += i * i % 7
print(n)
"""
WORK_SETTINGS = "bench.djangoproject.settings_jobqueue_work"
KIND = "bench.workapp.tasks."  # our workload tasks' kinds: KIND + the task's name
CLAIMED = "SELECT count(*) FROM django_jobqueue_job WHERE status = 'claimed'"
CONNECTED = (  # pgqueuer LISTENs on its only connection, which then shows other queries
    "SELECT count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Watch:
    """Samples the worker processes (and their children) at each poll: peak resident
    memory per process, the most threads of one process, and, for ours, jobs claimed."""

    workers: list[Worker]
    conn: Conn | None = None  # when set, the claimed jobs are counted too
    rss_kib: int = 0
    threads: int = 0
    claimed: int = 0
    seen: set[int] = field(default_factory=set)
    cpu: dict[int, float] = field(default_factory=dict)  # CPU seconds used, by process

    def __call__(self) -> None:
        for worker in self.workers:
            for pid in tree(worker.popen.pid):
                status = proc_status(pid)
                if not status:
                    continue
                self.seen.add(pid)
                self.cpu[pid] = max(self.cpu.get(pid, 0.0), cpu_seconds(pid))
                self.rss_kib = max(self.rss_kib, status.get("VmHWM", 0))
                self.threads = max(self.threads, status.get("Threads", 0))
        if self.conn is not None:
            self.claimed = max(self.claimed, int(scalar(self.conn, CLAIMED)))

    @property
    def rss_mib(self) -> float:
        return self.rss_kib / 1024


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc (a supervisor's worker processes)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            text = Path(f"/proc/{current}/task/{current}/children").read_text()
        except OSError:
            continue
        todo += [int(child) for child in text.split()]
    return found


def cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has used so far (0: it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def proc_status(pid: int) -> dict[str, int]:
    """The numeric fields of /proc/PID/status that a Watch reads (empty: it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        name, _, value = line.partition(":")
        if name in ("VmHWM", "Threads"):
            out[name] = int(value.split()[0])
    return out


def runworker(*options: str) -> list[str]:
    return [sys.executable, "-m", "django", "runworker", *options]


@dataclass(frozen=True)
class Run:
    """How one system's workers run one workload: the task, its jobs and the command."""

    task: str  # ours: the bench.workapp task; pgqueuer: the entrypoint
    n: int
    ms: int
    argv: list[str] | None  # None: the system's own worker command
    workers: int = WORKERS
    settings: bool = True  # ours: run with WORK_SETTINGS (the workload tasks)
    # Worker processes that must be listening before the jobs go in (0: preload them
    # before the workers start, as the plain drains do). Short drains need it: a
    # runworker starting a second later than the other, or a supervisor's second
    # child, would otherwise leave the first alone for a good part of the clock.
    ready: int = 0

    def env(self, s: System) -> dict[str, str] | None:
        ours = s.key == OURS and self.settings
        return {"DJANGO_SETTINGS_MODULE": WORK_SETTINGS} if ours else None


def drained(b: Bench, s: System, run: Run, *, count_claimed: bool = False) -> tuple[Any, Watch]:
    """Preload ``run.n`` jobs, start the workers, drain while watching them."""
    env = run.env(s)

    def load() -> None:
        b.agent(s, db, "preload_work", env, task=run.task, n=run.n, kwargs={"ms": run.ms})
        conn.execute("ANALYZE")

    with b.fresh(s) as db, b.server.connect(db) as conn:
        if not run.settings:
            b.preload(s, db, conn, run.n)
        elif not run.ready:
            load()
        conn.execute("CHECKPOINT")
        with b.workers(s, db, run.workers, argv=run.argv, env=env) as procs:
            watch = Watch(procs, conn if count_claimed else None)
            if run.ready:
                wait_listening(conn, procs, run.ready, s, settle=b.sizes.ready_settle)
                load()
            result = b.drain(s, conn, run.n, procs, watch=watch)
            watch()
        if not run.ready:  # the workers started on the backlog: their start-up is theirs
            result = b.with_phases(result, s, conn, procs)
    return result, watch


def wait_listening(
    conn: Conn, procs: list[Worker], count: int, s: System, *, settle: float
) -> None:
    """Until ``count`` worker processes listen, then ``settle`` more seconds: ours as its
    processes log it (``System.ready_line``), pgqueuer's as connected to the database."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not _listening(conn, procs, count, s):
        if time.monotonic() > deadline or not all(p.alive() for p in procs):
            detail = "\n\n".join(p.describe() for p in procs)
            raise BenchError(f"{count} worker processes not listening", detail)
        time.sleep(0.05)
    time.sleep(settle)


def _listening(conn: Conn, procs: list[Worker], count: int, s: System) -> bool:
    if s.ready_line is not None:
        return sum(p.logged(s.ready_line) for p in procs) >= count
    return int(scalar(conn, CONNECTED)) >= count


def _rep(result: Any, watch: Watch, **raw: Any) -> Rep:
    return Rep(
        {**result.values(), "rss": watch.rss_mib},
        {
            **result.raw(),
            "peak_rss_mib": watch.rss_mib,
            "processes": len(watch.seen),
            "worker_cpu_seconds": sum(watch.cpu.values()),
            **raw,
        },
    )


def drain_defaults(b: Bench, s: System) -> Rep:
    argv = runworker() if s.key == OURS else None
    result, watch = drained(b, s, Run("noop", b.sizes.drain, 0, argv, settings=False))
    return _rep(result, watch, argv=argv)


def drain_best(b: Bench, s: System) -> Rep:
    argv = runworker("--concurrency", str(BEST_CONCURRENCY)) if s.key == OURS else None
    result, watch = drained(b, s, Run("noop", b.sizes.drain, 0, argv, settings=False))
    return _rep(result, watch, argv=argv)


def io_drain(asynchronous: bool) -> Any:
    def measure(b: Bench, s: System) -> Rep:
        sz = b.sizes
        if s.key != OURS:
            run = Run("wait", sz.io_jobs, sz.io_ms, None, ready=WORKERS)
        elif asynchronous:
            options = ("--kind", f"{KIND}wait_async", "--async-concurrency", str(ASYNC_CONCURRENCY))
            run = Run("wait_async", sz.io_jobs, sz.io_ms, runworker(*options), ready=WORKERS)
        else:
            options = ("--kind", f"{KIND}wait", "--concurrency", str(IO_CONCURRENCY))
            run = Run("wait", sz.io_jobs, sz.io_ms, runworker(*options), ready=WORKERS)
        result, watch = drained(b, s, run)
        return _rep(result, watch, argv=run.argv, ms=sz.io_ms)

    return measure


def cpu(b: Bench, s: System) -> Rep:
    """``--processes 1`` and ``2`` in the order 1, 2, 2, 1, each on half the jobs: a load
    that drifts during the measure (the machine is shared) then weighs on both alike,
    where one after the other measured 3.56 and 1.08 in two runs of one evening. Each
    segment's workers start on its preloaded jobs, so beside the polled rate it has a
    whole run (start-up included: what a burst of work sees) and a steady rate."""
    variants: dict[Any, tuple[tuple[str, ...], int]] = {
        1: (("--processes", "1"), 1),
        2: (("--processes", "2"), 2),
    }
    rates, rss, segments = _alternated(b, s, variants, "processes", preload=True)
    one, two = rates[1], rates[2]
    whole, steady, startup = _phase_rates(segments, "processes", variants)
    machine = machine_scaling(b.sizes.spin_seconds)
    return Rep(
        {
            "one": one,
            "two": two,
            "ratio": two / one,
            "whole_one": whole[1],
            "whole_two": whole[2],
            "ratio_whole": whole[2] / whole[1],
            "ratio_steady": steady[2] / steady[1],
            "startup_one": startup[1],
            "startup_two": startup[2],
            "machine": machine,
            "rss": rss,
        },
        {"ms": b.sizes.cpu_ms, "concurrency": CPU_CONCURRENCY, "segments": segments},
    )


def _phase_rates(
    segments: list[dict[str, Any]], label: str, variants: Any
) -> tuple[dict[Any, float], dict[Any, float], dict[Any, float]]:
    """Each variant's whole-run and steady rates over its segments (their jobs over
    their summed spans) and its mean start-up; NaN where a segment has no phases."""
    whole, steady, startup = {}, {}, {}
    for key in variants:
        found = [seg.get("phases") for seg in segments if seg[label] == key]
        phases = [p for p in found if p]
        if not found or len(phases) < len(found):
            whole[key] = steady[key] = startup[key] = math.nan
            continue
        span = sum(p["last"] - p["started"] for p in phases)
        after = sum(p["last"] - p["first"] for p in phases)
        whole[key] = sum(p["jobs"] for p in phases) / span if span > 0 else math.nan
        steady[key] = sum(p["after_first"] for p in phases) / after if after > 0 else math.nan
        startup[key] = sum(p["first"] - p["started"] for p in phases) / len(phases)
    return whole, steady, startup


def cpu_pool(b: Bench, s: System) -> Rep:
    """One ``runworker --concurrency 2`` on slot threads, and one with ``--pool process``
    (a child process per slot), in the order threads, process, process, threads, each
    on half the jobs (as ``cpu``): what the process pool buys CPU-bound Python."""
    rates, rss, segments = _alternated(
        b, s, {"thread": ((), 1), "process": (("--pool", "process"), 1)}, "pool"
    )
    threads, process = rates["thread"], rates["process"]
    return Rep(
        {"threads": threads, "process": process, "ratio": process / threads, "rss": rss},
        {"ms": b.sizes.cpu_ms, "concurrency": CPU_CONCURRENCY, "segments": segments},
    )


def _alternated(
    b: Bench,
    s: System,
    variants: dict[Any, tuple[tuple[str, ...], int]],
    label: str,
    *,
    preload: bool = False,
) -> tuple[dict[Any, float], float, list[dict[str, Any]]]:
    """The CPU drain under two variants of ``runworker`` (their extra options, and how
    many worker processes listen), on half the jobs each, in the order first, second,
    second, first: each variant's rate (NaN when untimed), the peak RSS, the segments.
    ``preload``: the jobs are in before the workers start (each segment then has its
    phases: whole run, steady, start-up), not enqueued once they all listen."""
    sz = b.sizes
    half = max(sz.cpu_jobs // 2, 1)
    first, second = variants
    counted = dict.fromkeys(variants, 0)
    seconds = dict.fromkeys(variants, 0.0)
    rss = 0.0
    segments = []
    untimed: set[Any] = set()
    for key in (first, second, second, first):
        extra, ready = variants[key]
        options = ("--kind", f"{KIND}compute", "--concurrency", str(CPU_CONCURRENCY))
        argv = runworker(*options, *extra)
        run = Run("compute", half, sz.cpu_ms, argv, workers=1, ready=0 if preload else ready)
        result, watch = drained(b, s, run)
        counted[key] += result.counted
        seconds[key] += result.seconds
        if not result.seconds:  # untimed (the quick form): this count has no rate
            untimed.add(key)
        rss = max(rss, watch.rss_mib)
        segments.append({label: key, **result.raw(), "peak_rss_mib": watch.rss_mib})
    # NaN: the quick form drained a segment before its first poll (harness.Bench.drain)
    rates = {k: math.nan if k in untimed else counted[k] / seconds[k] for k in variants}
    return rates, rss, segments


def machine_scaling(spin_seconds: float) -> float:
    """What two processes of pure Python get done beside one, on this machine now: the
    ceiling of the CPU drain's ratio (2 on two idle cores; less when others share them),
    measured in the same order, 1, 2, 2, 1."""
    work = {1: 0, 2: 0}
    for processes in ORDER:
        argv = [sys.executable, "-c", SPIN, str(spin_seconds)]
        procs = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(processes)
        ]
        work[processes] += sum(int(p.communicate()[0]) for p in procs)
    return work[2] / work[1]


def many_async(b: Bench, s: System) -> Rep:
    sz = b.sizes
    options = ("--kind", f"{KIND}wait_async", "--async-concurrency", str(sz.many_async))
    run = Run("wait_async", sz.many_async, sz.many_async_ms, runworker(*options), workers=1)
    result, watch = drained(b, s, run, count_claimed=True)
    return Rep(
        {
            "rate": result.rate,
            "at_once": watch.claimed,
            "threads": watch.threads,
            "rss": watch.rss_mib,
        },
        {**result.raw(), "peak_claimed": watch.claimed, "peak_threads": watch.threads},
    )


def _ours_and_pgq(s: System) -> bool:
    return s.key in (OURS, PGQ)


def _ours(s: System) -> bool:
    return s.key == OURS


def _rss(label: str) -> Row:
    return Row("rss", f"  peak worker RSS, {label} (MiB)", True)


def _drain_measures(sz: Sizes) -> tuple[Measure, ...]:
    """The no-op drains: at the defaults and at the documented best concurrency."""
    best = f"drain {sz.drain:,} no-ops, ours at --concurrency {BEST_CONCURRENCY} (jobs/s)"
    return (
        Measure(
            "drain_defaults",
            (
                Row("rate", f"drain {sz.drain:,} no-ops, {WORKERS} workers at defaults (jobs/s)"),
                *phase_rows(),
                _rss("no-op drain at defaults"),
            ),
            drain_defaults,
            applies=_ours_and_pgq,
        ),
        Measure(
            "drain_best",
            (Row("rate", best), *phase_rows(), _rss(f"no-op drain at {BEST_CONCURRENCY}")),
            drain_best,
            applies=_ours_and_pgq,
        ),
    )


def _io_measures(sz: Sizes) -> tuple[Measure, ...]:
    """The I/O-bound drains, sync on threads and async on the event loop."""
    io = f"{sz.io_jobs:,} jobs x {sz.io_ms} ms, {WORKERS} workers"
    return (
        Measure(
            "io_sync",
            (
                Row("rate", f"I/O drain {io}, ours sync at {IO_CONCURRENCY} (jobs/s)"),
                _rss("I/O sync"),
            ),
            io_drain(asynchronous=False),
            applies=_ours_and_pgq,
        ),
        Measure(
            "io_async",
            (Row("rate", f"I/O drain {io}, ours async def (jobs/s)"), _rss("I/O async")),
            io_drain(asynchronous=True),
            applies=_ours_and_pgq,
        ),
    )


def _process_measures(sz: Sizes) -> tuple[Measure, ...]:
    """Ours only: the CPU-bound drain over processes, and many async jobs in one."""
    return (
        Measure(
            "cpu",
            (
                Row("one", f"CPU drain {sz.cpu_jobs:,} x {sz.cpu_ms} ms (1,2,2,1), --processes 1"),
                Row("two", "CPU drain, --processes 2 (jobs/s)"),
                Row("ratio", "CPU drain, --processes 2 / --processes 1 (polled)"),
                Row("whole_one", "  whole run, start-up included, --processes 1 (jobs/s)"),
                Row("whole_two", "  whole run, --processes 2 (jobs/s)"),
                Row("ratio_whole", "  whole run, --processes 2 / 1 (target >= 1.8)"),
                Row("ratio_steady", "  steady, --processes 2 / 1"),
                Row("startup_one", "  start-up to the first settlement, --processes 1 (s)", True),
                Row("startup_two", "  start-up to the first settlement, --processes 2 (s)", True),
                Row("machine", "  the machine's own: 2 pure-Python processes / 1, same order"),
                _rss("CPU drain"),
            ),
            cpu,
            applies=_ours,
        ),
        Measure(
            "cpu_pool",
            (
                Row("threads", f"CPU drain {sz.cpu_jobs:,} x {sz.cpu_ms} ms, slot threads"),
                Row("process", "CPU drain, --pool process (jobs/s)"),
                Row("ratio", "CPU drain, --pool process / threads"),
                _rss("CPU drain, pool"),
            ),
            cpu_pool,
            applies=_ours,
        ),
        Measure(
            "many_async",
            (
                Row("rate", f"{sz.many_async:,} async jobs x {sz.many_async_ms} ms, 1 process"),
                Row("at_once", "  most of them claimed at once"),
                Row("threads", "  most threads of the worker process", True),
                _rss("many async"),
            ),
            many_async,
            applies=_ours,
        ),
    )


def workload_measures(sz: Sizes) -> tuple[Measure, ...]:
    return _drain_measures(sz) + _io_measures(sz) + _process_measures(sz)
