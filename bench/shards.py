"""``python -m bench.shards``: what a second queue database costs a worker per job
(issue 33): the statements it sends and the CPU it uses per job, one database against two.

Two throw-away PostgreSQL clusters (``initdb``, as the shards test tier starts them) on
``--ports``. *One database*: ``--jobs`` no-ops preloaded on the first cluster, drained by
one ``runworker`` (bench's worker command, ``--concurrency 16``). *Two databases*: half
of them on each cluster, drained by one ``runworker`` whose settings name both
(``bench/djangoproject/settings_shards.py``: one loop each, in one process). Every
connection goes through bench's counting proxy (one per cluster), and the worker's CPU
and that of the server processes serving it (its sessions, by ``pg_stat_activity``) are
read from ``/proc`` at each poll of the drain: what a job costs the primary's cores.
Statements and CPU are everything from the worker's start until the last job was seen
done, over the jobs: start-up and idle polling included, as bench's statements measure
counts them. The runs alternate (one, two, two, one, ...: ``--reps`` of each) on fresh
databases. The clusters run with ``fsync=off`` (the test tier's): both sides alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.pg import Server
from bench.procs import Worker, child_env, run_agent
from bench.proxy import CountingProxy
from bench.systems.jobqueue import JobQueue
from bench.workloads import cpu_seconds, tree
from tests.chaos import pgserver

SETTINGS = "bench.djangoproject.settings_shards"
NAME = "bench_shards"
DRAIN_TIMEOUT = 300.0
# The worker's sessions (the server processes serving it; not the harness's own).
BACKENDS = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
)
DEFAULT_JSON = Path(__file__).resolve().parent / "shards.json"


class Cluster:
    """One throw-away cluster, its template database (migrated once) and its proxy."""

    def __init__(self, port: int) -> None:
        self.pg = pgserver.ThrowawayPostgres(port=port)
        self.pg.init()
        self.pg.start()
        self.server = Server(self.pg.url())
        self.server.create(f"{NAME}_template")
        run_agent(JobQueue(), self.server.url(f"{NAME}_template"), "install", {}, 600.0)
        self.proxy = CountingProxy("127.0.0.1", port)
        self.proxy.start()

    def fresh(self) -> str:
        self.server.create(NAME, template=f"{NAME}_template")
        return NAME

    def proxied(self) -> str:
        return self.server.url(NAME, port=self.proxy.port, sslmode="disable")

    def close(self) -> None:
        self.proxy.stop()
        self.pg.close()


def drain(clusters: list[Cluster], jobs: int, workdir: Path) -> dict[str, float]:
    """``jobs`` no-ops split over ``clusters``, drained by one runworker serving them."""
    system = JobQueue()
    share = jobs // len(clusters)
    conns = []
    for cluster in clusters:
        db = cluster.fresh()
        run_agent(system, cluster.server.url(db), "preload", {"n": share}, 600.0)
        conn = cluster.server.connect(db)
        conn.execute("CHECKPOINT")
        conns.append(conn)
        cluster.proxy.reset()
    extra = {"DJANGO_SETTINGS_MODULE": SETTINGS} if len(clusters) > 1 else {}
    if len(clusters) > 1:
        extra["BENCH_SHARD_B_URL"] = clusters[1].proxied()
    env = child_env(system, clusters[0].proxied(), extra)
    worker = Worker(system.worker_argv(16), env, workdir / f"worker-{len(clusters)}.log")
    cpu: dict[int, float] = {}
    server_cpu: dict[int, float] = {}
    started = time.monotonic()
    try:
        while True:
            left = sum(system.remaining(conn, share) for conn in conns)
            for pid in tree(worker.popen.pid):
                cpu[pid] = max(cpu.get(pid, 0.0), cpu_seconds(pid))
            for conn in conns:
                for (pid,) in conn.execute(BACKENDS).fetchall():
                    server_cpu[pid] = max(server_cpu.get(pid, 0.0), cpu_seconds(pid))
            if not left:
                break
            if not worker.alive() or time.monotonic() - started > DRAIN_TIMEOUT:
                raise RuntimeError(f"the drain did not finish:\n{worker.describe()}")
            time.sleep(0.1)
        seconds = time.monotonic() - started
        statements = sum(c.proxy.counts().statements for c in clusters)
    finally:
        worker.stop()
        for conn in conns:
            conn.close()
    done = share * len(clusters)
    return {
        "jobs": done,
        "statements_per_job": statements / done,
        "cpu_ms_per_job": 1000 * sum(cpu.values()) / done,
        "server_cpu_ms_per_job": 1000 * sum(server_cpu.values()) / done,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=10_000, help="no-ops per drain")
    p.add_argument("--reps", type=int, default=3, help="drains of each layout")
    p.add_argument("--ports", default="5521,5522", help="the two clusters' ports")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    ports = [int(port) for port in args.ports.split(",")]
    if len(ports) != 2 or args.jobs < 2 or args.reps < 1:
        p.error("--ports: two ports; --jobs: 2 or more; --reps: 1 or more")
    if pgserver.unavailable():
        p.error(str(pgserver.unavailable()))
    workdir = Path(tempfile.mkdtemp(prefix="jobqueue-shards-"))
    clusters: list[Cluster] = []
    runs: dict[str, list[dict[str, float]]] = {"one": [], "two": []}
    try:
        clusters = [Cluster(port) for port in ports]
        for rep in range(args.reps):
            for layout in ("one", "two") if rep % 2 == 0 else ("two", "one"):
                chosen = clusters[:1] if layout == "one" else clusters
                runs[layout].append(drain(chosen, args.jobs, workdir))
                sys.stderr.write(f"{layout} database(s): {runs[layout][-1]}\n")
    finally:
        for cluster in clusters:
            cluster.close()
    medians: dict[str, dict[str, float]] = {
        layout: {k: statistics.median(r[k] for r in reps) for k in reps[0]}
        for layout, reps in runs.items()
    }
    print(f"{'':34}{'one database':>16}{'two databases':>16}{'two / one':>12}")
    for key, label in (
        ("statements_per_job", "statements per job"),
        ("cpu_ms_per_job", "worker CPU per job (ms)"),
        ("server_cpu_ms_per_job", "PostgreSQL CPU per job (ms)"),
    ):
        one, two = medians["one"][key], medians["two"][key]
        print(f"{label:34}{one:16.2f}{two:16.2f}{two / one:12.2f}")
    args.json.write_text(json.dumps({"argv": sys.argv, "medians": medians, "runs": runs}, indent=1))
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
