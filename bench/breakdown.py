"""``python -m bench.breakdown``: where a no-op job's time goes, from ``enqueue()`` to
its settled row (issue 36), and that the optional features cost nothing unused.

Each round runs ``bench.costs`` twice in child processes, each on a fresh database from
a template holding our schema: once as installed here (``sentry_sdk`` and
``opentelemetry`` importable, neither configured: "installed, off") and once with both
made unimportable ("absent"), in alternating order. It prints, per part, the median
over the rounds of each bucket in µs per job for both, and their difference:

- **enqueue** (the web process's side): the total of one ``noop.enqueue()`` in
  autocommit, its statement's round trip (inside psycopg's ``Cursor.execute``), and the
  Python time split by module (validation, tracing / Sentry, ids, inserting, the
  dialect, the task API, Django, the rest), and, in a loop of 100,000, what each
  enqueue asks of the optional features (``tracing.capture_context``,
  ``tracing.enqueue_span``);
- **worker** (one ``runworker --burst --processes 1`` on a preloaded backlog): the
  elapsed time per job, then each step's own time per job: the turn's Python and its
  statement (guarded settlement, journal rows, tally and the claim are one statement on
  PostgreSQL), the hand-off to a slot, the run (``Pipeline.run_one``, on the slot
  threads, so it overlaps the loop's steps), collecting the ended runs, the
  bookkeeping after a turn, the loop's waits.

Options: ``--database-url`` (an admin URL on loopback, as ``python -m bench``),
``--enqueues N`` (default 2,000), ``--jobs N`` (default 10,000), ``--rounds N``
(default 2), ``--json PATH``. Figures from one run are comparable with each other,
not with another machine's or another hour's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.pg import Server
from bench.procs import REPO_ROOT, child_env, run_agent
from bench.systems.jobqueue import JobQueue

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
MODES = ("installed", "absent")  # sentry_sdk / opentelemetry installed but off; hidden
TIMEOUT = 1800.0


def medians(runs: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each key's median over ``runs`` (a key some runs lack counts as 0 there: a bucket
    a run never entered cost it nothing)."""
    keys = list(dict.fromkeys(k for run in runs for k in run))  # the first run's order
    return {k: statistics.median([run.get(k, 0.0) for run in runs]) for k in keys}


def render(title: str, by_mode: dict[str, dict[str, float]]) -> str:
    """A table of µs per job, a column per mode, and installed − absent."""
    first, second = MODES
    rows = list(dict.fromkeys([*by_mode[first], *by_mode[second]]))
    width = max([len(title), *map(len, rows)])
    lines = [f"{title:<{width}}  {first:>10}  {second:>10}  {'diff':>8}"]
    lines.append("-" * len(lines[0]))
    for row in rows:
        a, b = by_mode[first].get(row, 0.0), by_mode[second].get(row, 0.0)
        lines.append(f"{row:<{width}}  {a:>10.1f}  {b:>10.1f}  {a - b:>+8.1f}")
    return "\n".join(lines)


def enqueue_rows(part: dict[str, Any]) -> dict[str, float]:
    return {
        "enqueue(), total": part["total_us"],
        "  statement round trip (psycopg, wire, server)": part["statement_us"],
        "  Python": part["python_us"],
        **{f"    {k}": v for k, v in _largest_first(part["python_buckets_us"])},
    }


def worker_rows(part: dict[str, Any]) -> dict[str, float]:
    return {
        "elapsed per job (one process)": part["elapsed_us"],
        **{f"  {k}": v for k, v in _largest_first(part["steps_us"])},
    }


def _largest_first(buckets: dict[str, float]) -> list[tuple[str, float]]:
    return sorted(buckets.items(), key=lambda item: -item[1])


def _child(server: Server, db: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.costs", "--enqueues", str(args.enqueues)]
    argv += ["--jobs", str(args.jobs), *(["--absent"] if mode == "absent" else [])]
    proc = subprocess.run(
        argv,
        cwd=REPO_ROOT,
        env=child_env(JobQueue(), server.url(db)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"bench.costs ({mode}) failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.breakdown", description=__doc__)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--enqueues", type=int, default=2_000)
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="write every round's figures")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    server = Server(args.database_url)
    prefix = f"bench_breakdown_{os.getpid()}"
    template = f"{prefix}_template"
    server.create(template)
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    try:
        run_agent(JobQueue(), server.url(template), "install", {}, TIMEOUT)
        for i in range(args.rounds):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                db = f"{prefix}_{i}_{mode}"
                server.create(db, template=template)
                try:
                    runs[mode].append(_child(server, db, mode, args))
                finally:
                    server.drop(db)
                sys.stderr.write(f"round {i + 1}/{args.rounds}: {mode} done\n")
    finally:
        server.drop(template)
    enqueue = {m: medians([enqueue_rows(r["enqueue"]) for r in runs[m]]) for m in MODES}
    worker = {m: medians([worker_rows(r["worker"]) for r in runs[m]]) for m in MODES}
    optional = {m: medians([r["optional_us"] for r in runs[m]]) for m in MODES}
    print(f"µs per job, median of {args.rounds} round(s); installed: sentry_sdk and ")
    print("opentelemetry importable, neither configured; absent: both unimportable")
    print()
    print(render(f"enqueue, N={args.enqueues:,}", enqueue))
    print()
    print(render("each enqueue's optional-feature calls, in a loop", optional))
    print()
    print(render(f"worker, {args.jobs:,} no-ops, runworker --burst", worker))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")
        print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
