"""``python -m bench``: run the benchmark, print the table, write the JSON.

Exits 1 if any measure failed to run (never because of a speed), 2 on bad arguments
or an unreachable server, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import fields, replace
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from bench import report
from bench.config import FULL, QUICK, Config, Sizes
from bench.harness import Bench
from bench.measures import measures
from bench.pg import Server
from bench.procs import compile_sources
from bench.runner import run
from bench.systems import select

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_JSON = Path(__file__).resolve().parent / "results.json"


# What --run-logs sets in the workers' environment (bench.djangoproject.settings_jobqueue
# and bench.benchapp.tasks read it).
RUN_LOGS_MODES = ("on", "off", "lines")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="django_jobqueue vs django-tasks-db vs pgqueuer, by one harness.",
    )
    p.add_argument("--quick", action="store_true", help="small sizes, 1 repetition (for CI)")
    p.add_argument("--reps", type=positive, help="repetitions per measure (default 3; quick 1)")
    p.add_argument("--only", metavar="SYSTEM[,SYSTEM]", help="run only these systems")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")
    p.add_argument("--database-url", default=DEFAULT_URL, help="admin connection (loopback only)")
    p.add_argument(
        "--measures",
        metavar="MEASURE[,MEASURE]",
        help="run only these measures, by key (chord_write, chord_drain, chain, drain_1, ...)",
    )
    p.add_argument(
        "--concurrency",
        type=positive,
        default=16,
        help="django_jobqueue's jobs in flight per worker (default 16)",
    )
    p.add_argument(
        "--run-logs",
        choices=RUN_LOGS_MODES,
        default="on",
        help="django_jobqueue's per-run log capture: on (its default, INFO; the no-op logs "
        "nothing), off (RUN_LOGS None), lines (on, and each no-op logs two INFO lines)",
    )
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="NAME=N",
        help="override one of the sizes (bench.config.Sizes), e.g. --size drain=100000",
    )
    return p


def sized(base: Sizes, overrides: list[str]) -> Sizes:
    """``base`` with the ``--size NAME=N`` overrides applied (a bad one is refused,
    naming it and the sizes there are)."""
    known = [f.name for f in fields(Sizes)]
    changes: dict[str, Any] = {}
    for item in overrides:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or name not in known:
            raise ValueError(f"--size {item!r}: expected NAME=N, NAME one of {', '.join(known)}")
        try:
            # The size's own type, read off its value (the annotations are text here).
            value = type(getattr(base, name))(text)
        except ValueError:
            raise ValueError(f"--size {item!r}: {text!r} is not a number") from None
        if value <= 0:
            raise ValueError(f"--size {item!r}: must be positive")
        changes[name] = value
    return replace(base, **changes)


def select_measures(names: str | None) -> frozenset[str]:
    """The measure keys ``--measures`` names (empty: every measure)."""
    if not names:
        return frozenset()
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    known = {m.key for m in measures(FULL)}
    unknown = sorted(wanted - known)
    if unknown:
        listed = ", ".join(sorted(known))
        raise ValueError(f"--measures: unknown measure(s) {', '.join(unknown)}; known: {listed}")
    return frozenset(wanted)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def log(message: str) -> None:
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {message}\n")
    sys.stderr.flush()


def _print_report(
    args: argparse.Namespace,
    config: Config,
    results: Any,
    server: Server,
    version: str,
    others: list[str],
    started: datetime,
    seconds: float,
    source_at_start: Any,
) -> None:
    """The run's table, its machine and source, and its JSON (the source is read again:
    a tree changed during the run is said so)."""
    source_at_end = report.source_fingerprint()
    info = report.machine(version, server.settings(report.PG_SETTINGS))
    info["other_bench_databases_at_start"] = others
    info["django_jobqueue_source"] = {"at_start": source_at_start, "at_end": source_at_end}
    print(report.describe_machine(info))
    print(report.describe_source(source_at_start, source_at_end))
    print(
        f"run: {seconds:.0f} s, concurrency {config.concurrency}, {config.reps} rep(s),"
        f" run logs {args.run_logs}"
    )
    print()
    print(report.table(config, results))
    print()
    print("workers:")
    for key, note in report.describe_workers(config).items():
        print(f"  {key}: {note}")
    report.write_json(
        args.json,
        config=config,
        results=results,
        info=info,
        started=started,
        seconds=seconds,
        argv=sys.argv,
    )
    print(f"\nJSON: {args.json}")


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    os.environ["BENCH_RUN_LOGS"] = args.run_logs  # the worker children inherit it
    try:
        server = Server(args.database_url)
        systems = select(args.only)
        chosen = select_measures(args.measures)
        sizes = sized(QUICK if args.quick else FULL, args.size)
    except ValueError as exc:
        p.error(str(exc))
    try:
        version = server.version()
        others = server.databases("bench\\_%")
    except Exception as exc:
        log(f"cannot reach PostgreSQL at {args.database_url}: {exc}")
        return 2
    if others:
        log(f"warning: another run's databases exist ({', '.join(others)}): if it is still")
        log("running, both share the CPUs and the numbers of each are disturbed")
    config = Config(
        sizes=sizes,
        reps=args.reps or (1 if args.quick else 3),
        concurrency=args.concurrency,
        systems=systems,
        server=server,
        quick=args.quick,
        only_measures=chosen,
    )
    workdir = Path(tempfile.mkdtemp(prefix="jobqueue-bench-"))
    signal.signal(signal.SIGTERM, _terminate)
    started, clock = datetime.now().astimezone(), time.monotonic()
    compile_sources()
    source_at_start = report.source_fingerprint()
    bench = Bench(config, workdir)
    try:
        results = run(config, bench, log)
    except KeyboardInterrupt:
        log(f"interrupted; worker logs in {workdir}")
        return 130
    finally:
        bench.close()
    seconds = time.monotonic() - clock
    _print_report(args, config, results, server, version, others, started, seconds, source_at_start)
    failures = report.errors(results)
    if failures:
        print("\nerrors (details in the JSON):")
        for line in failures:
            print(f"  {line}")
        print(f"worker logs kept in {workdir}")
        return 1
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
