"""``python -m bench.scale``: django_jobqueue with a big history against an empty database,
in one run (issue 33, "measured at scale").

For each journal layout (``plain``: one table; ``partitioned``: partitioned by day), two
databases are made from the benchmark's template: one left empty, one filled with the
history (``bench.history``, through ``bench.scale_db``); both are measured in turns
(``--reps`` times each, the order alternating: empty, full, then full, empty; the
machine is shared, and a drift then weighs on both), then dropped:

- the claim rate: bench's two-worker drain of ``--drain`` fresh no-ops (``drain_2``);
- the pickup latency p50/p95/p99: bench's own measure (``pickup_latency``);
- on the full one, every admin page of ``bench.admin_pages``, timed as it times them
  (bound: 500 ms);
- retention: the partitioned journal's oldest day dropped, an empty partition dropped,
  then a fortnight's partitions at once; the plain journal's oldest day deleted row by
  row (rolled back), for comparison.

The drains count the jobs left as pending or claimed ones (the history is all finished,
where bench's own count is of completed jobs). Prints one table, each full database's
column beside its empty twin's with the ratios (the medians of the reps), and writes
every figure to JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.config import FULL, Config
from bench.errors import BenchError
from bench.harness import Bench
from bench.measures import drain_with, pickup_latency
from bench.pg import Conn, Server, read_settlements, scalar
from bench.phases import Settlements
from bench.procs import REPO_ROOT, child_env, tail
from bench.systems.base import System
from bench.systems.jobqueue import JobQueue

LAYOUTS = ("plain", "partitioned")
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_JSON = Path(__file__).resolve().parent / "scale.json"
LOAD_TIMEOUT = 6 * 3600.0
PAGE_LIMIT_MS = 500.0
NOT_DONE = (
    "SELECT (SELECT count(*) FROM django_jobqueue_job WHERE status = 'pending')"
    " + (SELECT count(*) FROM django_jobqueue_job WHERE status = 'claimed')"
)


class History(JobQueue):
    """Ours, its drains counted by the jobs not yet done (a count over the pending and
    claimed rows' own partial indexes), not by the completed ones: the history holds
    millions of those; and a drain's phases read from the jobs settled since ``since``
    (a Unix time: the rep's start), not the history's nor an earlier rep's."""

    def __init__(self, since: float = 0.0) -> None:
        super().__init__()
        self.since = float(since)

    def remaining(self, conn: Conn, n: int) -> int:
        return int(scalar(conn, NOT_DONE))

    def settlements(self, conn: Conn) -> Settlements | None:
        since = f"to_timestamp({self.since!r})"  # a float of ours, never input
        where = f"status = 'completed' AND finished_at >= {since}"
        return read_settlements(conn, "django_jobqueue_job", "finished_at", where)


class OnDatabase(Bench):
    """Bench whose measures run on one database made beforehand (``target``), not on a
    fresh one each, and whose template is named after the run's ``prefix``."""

    def __init__(self, config: Config, workdir: Path, prefix: str) -> None:
        super().__init__(config, workdir)
        self.prefix = prefix
        self.target = ""

    def template(self, system: System) -> str:
        return f"{self.prefix}_template"

    @contextlib.contextmanager
    def fresh(self, system: System) -> Iterator[str]:
        yield self.target


def in_django(server: Server, db: str, action: str, layout: str, **params: Any) -> Any:
    """``bench.scale_db``'s ``action`` on ``db``; its JSON result."""
    argv = [sys.executable, "-m", "bench.scale_db", action, layout, json.dumps(params)]
    env = child_env(History(), server.url(db))
    proc = subprocess.run(
        argv,
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LOAD_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        raise BenchError(f"{action} on {layout} failed", tail(proc.stderr, 30))
    return json.loads(proc.stdout.strip().splitlines()[-1])["result"]


def log(message: str) -> None:
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {message}\n")
    sys.stderr.flush()


def _load(b: OnDatabase, db: str, layout: str, journal: int, jobs: int) -> dict[str, Any]:
    b.server.create(db, template=b.template(History()))
    started = time.monotonic()
    loaded: dict[str, Any] = in_django(b.server, db, "load", layout, journal=journal, jobs=jobs)
    loaded["seconds"] = time.monotonic() - started
    with b.server.connect(db) as conn:
        conn.execute("CHECKPOINT")
    log(f"{db}: loaded {loaded['journal']:,} entries, {loaded['jobs']:,} jobs")
    return loaded


def _on(b: OnDatabase, db: str, run: Any) -> dict[str, Any]:
    b.target = db
    # The pickup measure's stamps go to a file named after the database: a rep's own.
    (b.workdir / f"{db}-stamps.txt").unlink(missing_ok=True)
    rep = run(b, History(since=time.time()))
    return {"values": rep.values, "raw": rep.raw}


def _median(reps: list[dict[str, Any]]) -> dict[str, Any]:
    keys = reps[0]["values"]
    values = {k: statistics.median(r["values"][k] for r in reps) for k in keys}
    return {"values": values, "reps": reps}


def measure(b: OnDatabase, layout: str, args: argparse.Namespace) -> dict[str, Any]:
    """One journal layout: an empty database and one with the history, made and filled,
    measured in turns (empty, full; then full, empty; ...: a drift of the shared machine
    weighs on both), then dropped (unless ``--keep``)."""
    empty, full = f"{b.prefix}_{layout}_empty", f"{b.prefix}_{layout}"
    out: dict[str, dict[str, Any]] = {"empty": {}, "full": {}}
    try:
        if args.reuse:  # what a --keep run left: measured again, not loaded again
            log(f"{layout}: measuring {empty} and {full} as they are")
        else:
            out["empty"]["load"] = _load(b, empty, layout, 0, 0)
            out["full"]["load"] = _load(b, full, layout, args.journal, args.jobs)
        for name, run in (("drain", drain_with(2)), ("pickup", pickup_latency)):
            reps: dict[str, list[dict[str, Any]]] = {"empty": [], "full": []}
            for rep in range(args.reps):
                order = ("empty", "full") if rep % 2 == 0 else ("full", "empty")
                for which in order:
                    reps[which].append(_on(b, empty if which == "empty" else full, run))
                    said = ", ".join(f"{k}={v:.4g}" for k, v in reps[which][-1]["values"].items())
                    log(f"{layout} {which}: {name} {said}")
            for which in out:
                out[which][name] = _median(reps[which])
        out["full"]["pages"] = in_django(b.server, full, "pages", layout)
        out["full"]["retention"] = in_django(b.server, full, "retention", layout)
        if skipped := out["full"]["retention"].get("skipped"):
            log(f"{layout} full: retention not measured: {skipped}")
        return out
    finally:
        if not args.keep:
            b.server.drop(empty)
            b.server.drop(full)


def _cell(value: float | None, ref: float | None, fmt: str) -> str:
    if value is None:
        return f"{'-':>22}"
    ratio = f" ({value / ref:4.2f})" if ref else ""
    return f"{format(value, fmt) + ratio:>22}"


def table(results: dict[str, dict[str, Any]]) -> str:
    """A column per database (a layout's empty one, then its full one with, for the drain
    and the pickup latency, its ratio to the empty one's figure in brackets)."""
    columns = [(layout, which) for layout in results for which in ("empty", "full")]
    lines = [f"{'':46}" + "".join(f"{f'{layout}, {which}':>22}" for layout, which in columns)]

    def row(
        label: str, path: tuple[str, ...], fmt: str, scale: float = 1.0, ratio: bool = False
    ) -> None:
        cells, flag = [], ""
        for layout, which in columns:
            value = _get(results[layout][which], path)
            ref = _get(results[layout]["empty"], path) if which == "full" and ratio else None
            value = value / scale if value is not None else None
            ref = ref / scale if ref else None
            cells.append(_cell(value, ref, fmt))
            if path[0] == "pages" and value is not None and value > PAGE_LIMIT_MS:
                flag = "  over 500 ms"
        lines.append(f"{label:46}" + "".join(cells) + flag)

    row("journal entries", ("load", "journal"), ",.0f")
    row("finished jobs", ("load", "jobs"), ",.0f")
    row("load, all of it (s)", ("load", "seconds"), ",.0f")
    for part in ("rows", "indexes", "vacuum"):
        row(f"  {part} (s)", ("load", f"{part}_seconds"), ",.0f")
    for size in ("jobs_total", "journal_total", "journal_heap", "database"):
        row(f"size, {size} (MiB)", ("load", "sizes", size), ",.0f", 2**20)
    row("drain, 2 workers (jobs/s)", ("drain", "values", "rate"), ".0f", ratio=True)
    for q in ("p50", "p95", "p99"):
        row(f"pickup latency {q} (ms)", ("pickup", "values", q), ".1f", ratio=True)
    pages = next(iter(results.values()))["full"].get("pages", {})
    for name in pages:
        row(f"page: {name} (ms)", ("pages", name, "median_ms"), ".1f")
    for key in ("drop_day", "drop_empty", "drop_fortnight", "delete_day"):
        if any(_get(results[layout]["full"], ("retention", key)) for layout in results):
            row(f"retention, {key} (s)", ("retention", key, "seconds"), ".3f")
            row("  its entries", ("retention", key, "entries"), ",.0f")
    return "\n".join(lines)


def _get(node: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def machine(server: Server) -> dict[str, Any]:
    names = ("autovacuum", "shared_buffers", "max_wal_size", "maintenance_work_mem", "fsync")
    return {
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "postgresql": server.version(),
        "settings": server.settings(names),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    p.add_argument("--journal", type=int, default=100_000_000, help="journal entries")
    p.add_argument("--jobs", type=int, default=10_000_000, help="finished jobs")
    p.add_argument("--drain", type=int, default=20_000, help="no-ops drained by 2 workers")
    p.add_argument("--pickups", type=int, default=200, help="jobs of the pickup latency")
    p.add_argument("--reps", type=int, default=2, help="drains and pickups of each database")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help="of " + ", ".join(LAYOUTS))
    p.add_argument("--database-url", default=DEFAULT_URL, help="admin connection (loopback)")
    p.add_argument("--prefix", default="bench_scale", help="the databases' names' start")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--keep", action="store_true", help="keep the filled databases")
    p.add_argument(
        "--reuse", action="store_true", help="measure the databases a --keep run left, no load"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown or not layouts:
        p.error(f"--layouts: unknown {', '.join(unknown) or '(none)'}; known: {', '.join(LAYOUTS)}")
    if min(args.journal, args.jobs) < 0 or min(args.drain, args.reps) < 1 or args.pickups < 2:
        p.error("--journal, --jobs: 0 or more; --drain, --reps: 1 or more; --pickups: 2 or more")
    server = Server(args.database_url)
    sizes = replace(FULL, drain=args.drain, pickups=args.pickups)
    config = Config(sizes, 1, 16, (History(),), server, quick=False)
    b = OnDatabase(config, Path(tempfile.mkdtemp(prefix="jobqueue-scale-")), args.prefix)
    results: dict[str, Any] = {}
    try:
        b.install(History())
        for layout in layouts:
            log(f"{layout}: loading")
            results[layout] = measure(b, layout, args)
    finally:
        b.close()
    print(table(results))
    report = {"argv": sys.argv, "machine": machine(server), "layouts": results}
    args.json.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
