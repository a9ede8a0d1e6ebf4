"""``python -m bench.pickup_pair TREE_A TREE_B``: two checkouts' idle pickup latency,
side by side in one sitting, each job of one paired with a job of the other.

``python -m bench --measures pickup_latency`` run twice, a minute apart, moves the p50
by more than most changes to the pickup path do (150 µs between runs of one commit on
the two-core machine, against a p50 of 1.1-1.4 ms): the machine's state, not the
code, decides it. Here both checkouts' workers run at once on one database, one
``runworker --concurrency 16`` each (the bench's settings, each from its own tree),
each on a queue of its own, and one producer enqueues a stamp job to each queue in
turn, ``--gap`` seconds apart, the first of each pair alternating. Every pair of jobs
meets the machine in the same state, so the difference of the pair's two latencies
carries the code's difference and little of the machine's. Each round runs twice, the
trees' queues swapped the second time, on a fresh database.

Both workers hear every NOTIFY (one channel) and claim only for their own queue; each
wake-up of the other worker shares the machine with a pickup, so the latencies are
higher than the bench's single worker's, alike for both. The trees must share the
schema of this checkout, which migrates each database.

Prints, each run and over all of them, the p50 / p95 / p99 of each tree (ms) and the
median of the pairs' differences, B less A (µs; negative: B picks up sooner).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import wait_stamps
from bench.measures import percentiles
from bench.pg import Server
from bench.procs import Worker, child_env, run_agent
from bench.stamps import ENV
from bench.systems.jobqueue import JobQueue

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
QUEUES = ("pair_a", "pair_b")  # the first tree's queue, the second's (swapped each run)
READY_TIMEOUT = 60.0
TIMEOUT = 600.0


def latencies(stamps: dict[str, float], committed: dict[str, float], prefix: str) -> list[float]:
    """Seconds from each ``prefix`` job's commit to its start, in label order."""
    mark = f"{prefix}j"  # the producer's labels: a or b, then j and the pair's number
    labels = sorted((k for k in committed if k.startswith(mark)), key=lambda k: int(k[2:]))
    return [stamps[k] - committed[k] for k in labels if k in stamps]


def quantiles_ms(values: Sequence[float]) -> list[float]:
    """p50, p95 and p99 of ``values`` (seconds), in ms."""
    found = percentiles([v * 1000 for v in values])
    return [round(found[q], 3) for q in ("p50", "p95", "p99")]


def one_run(
    server: Server, db: str, trees: dict[str, Path], swap: bool, args: argparse.Namespace
) -> dict[str, Any]:
    """Both trees' workers on ``db``, the producer's pairs; each tree's latencies."""
    url = server.url(db)
    system = JobQueue()
    run_agent(system, url, "install", {}, TIMEOUT)
    queue_of = dict(zip(trees, QUEUES[::-1] if swap else QUEUES, strict=True))
    workers: dict[str, tuple[Worker, Path]] = {}
    try:
        for name, tree in trees.items():
            stamp_file = args.workdir / f"{db}-{name}.txt"
            extra = {"PYTHONPATH": str(tree), ENV: str(stamp_file)}
            argv = [sys.executable, "-m", "django", "runworker", "--concurrency", "16"]
            argv += ["--queue", queue_of[name]]
            log = args.workdir / f"{db}-{name}.log"
            workers[name] = (Worker(argv, child_env(system, url, extra), log, cwd=tree), stamp_file)
        deadline = time.monotonic() + READY_TIMEOUT
        while not all(w.logged(system.ready_line or "") for w, _ in workers.values()):
            if time.monotonic() > deadline or not all(w.alive() for w, _ in workers.values()):
                detail = "\n\n".join(w.describe() for w, _ in workers.values())
                raise SystemExit(f"the workers did not start listening:\n{detail}")
            time.sleep(0.05)
        params = {"count": args.jobs, "gap": args.gap, "warmup": 10, "queues": list(QUEUES)}
        committed: dict[str, float] = run_agent(system, url, "stamp_pairs", params, TIMEOUT)
        files = [stamp_file for _, stamp_file in workers.values()]
        stamps = wait_stamps(files, set(committed), [w for w, _ in workers.values()])
    finally:
        for worker, _ in workers.values():
            worker.stop()
    prefix = {QUEUES[0]: "a", QUEUES[1]: "b"}
    found = {name: latencies(stamps, committed, prefix[queue_of[name]]) for name in workers}
    return {"swapped": swap, **found}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each tree's quantiles over every run's jobs, and the pairs' differences."""
    pooled = {name: [v for r in runs for v in r[name]] for name in ("A", "B")}
    pairs = [b - a for r in runs for a, b in zip(r["A"], r["B"], strict=False)]
    per_run = [
        round(statistics.median(b - a for a, b in zip(r["A"], r["B"], strict=False)) * 1e6, 1)
        for r in runs
    ]
    return {
        "A": quantiles_ms(pooled["A"]),
        "B": quantiles_ms(pooled["B"]),
        "B-A_median_us": round(statistics.median(pairs) * 1e6, 1),
        "B-A_median_us_each_run": per_run,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.pickup_pair", description=__doc__)
    p.add_argument("tree_a", type=Path, help="a checkout (its django_jobqueue runs worker A)")
    p.add_argument("tree_b", type=Path, help="another checkout (worker B)")
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--jobs", type=int, default=300, help="pairs of jobs a run (default 300)")
    p.add_argument("--gap", type=float, default=0.02, help="seconds between two jobs")
    p.add_argument("--rounds", type=int, default=2, help="rounds of two runs (default 2)")
    p.add_argument("--json", type=Path, default=None, help="write every run's latencies")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    trees = {"A": args.tree_a.resolve(), "B": args.tree_b.resolve()}
    for name, tree in trees.items():
        if not (tree / "django_jobqueue" / "__init__.py").is_file():
            p.error(f"tree {name}: {tree} holds no django_jobqueue package")
    if args.jobs < 2 or args.rounds < 1 or args.gap <= 0:
        p.error("--jobs: 2 or more; --rounds: 1 or more; --gap: more than 0")
    server = Server(args.database_url)
    args.workdir = Path(tempfile.mkdtemp(prefix="bench_pair_"))
    runs = []
    for i in range(args.rounds * 2):
        db = f"bench_pair_{os.getpid()}_{i}"
        server.create(db)
        try:
            run = one_run(server, db, trees, swap=i % 2 == 1, args=args)
        finally:
            server.drop(db)
        runs.append(run)
        line = {"run": i + 1, **summary([run])}
        del line["B-A_median_us_each_run"]
        sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.write(json.dumps({"all": summary(runs)}) + "\n")
    if args.json is not None:
        named = {k: str(v) for k, v in trees.items()}
        args.json.write_text(json.dumps({"trees": named, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
