"""``python -m bench.shards``: what a second queue database costs a worker per job
(issue 33): the statements it sends and the CPU it uses per job, one database against two.

Two throw-away PostgreSQL clusters (``initdb``, as the shards test tier starts them) on
``--ports``. *One database*: one ``runworker`` (bench's worker command, ``--concurrency``
16 by default) on the first cluster, then ``--jobs`` no-ops enqueued there. *Two databases*: one
``runworker`` whose settings name both (``bench/djangoproject/settings_shards.py``: it
supervises a worker process per database), then half of the jobs enqueued on each.
Every connection of the worker goes through bench's counting proxy (one per cluster);
the CPU of its processes and of the server processes serving its sessions (by
``pg_stat_activity``) is read from ``/proc`` at each poll. Everything is counted from
the moment the worker listens on every database (its start-up left out) until the last
job is seen done, idle polling included, and divided by the jobs: the statements sent,
the worker's CPU and PostgreSQL's CPU per job (what a job costs the primary's cores).
With ``--each``, the jobs are enqueued one per transaction (bench's ``enqueue_each``,
one enqueuer per database) while the worker drains them, and PostgreSQL's CPU then
includes the enqueues' sessions: a job's whole cost to the primary when jobs arrive one
at a time and are claimed as they come. The runs alternate (one, two, two, one, ...:
``--reps`` of each) on fresh databases. The clusters run with ``fsync=off`` (the test
tier's): both sides alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.pg import Conn, Server
from bench.procs import Worker, child_env, run_agent
from bench.proxy import CountingProxy
from bench.systems.jobqueue import JobQueue
from bench.workloads import cpu_seconds, tree
from django_jobqueue.worker import LISTENING
from tests.chaos import pgserver

SETTINGS = "bench.djangoproject.settings_shards"
READY_TIMEOUT = 60.0
SETTLE = 1.0  # seconds more once every worker process listens
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


def _cpu(worker: Worker, conns: list[Conn]) -> dict[int, float]:
    """CPU seconds so far of the worker's processes and of the sessions serving it."""
    used = {pid: cpu_seconds(pid) for pid in tree(worker.popen.pid)}
    for conn in conns:
        used |= {pid: cpu_seconds(pid) for (pid,) in conn.execute(BACKENDS).fetchall()}
    return used


def _wait_listening(worker: Worker, conns: list[Conn]) -> None:
    """Until the worker has logged that it listens on each of its databases."""
    deadline = time.monotonic() + READY_TIMEOUT
    while worker.logged(LISTENING) < len(conns):
        if not worker.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start listening:\n{worker.describe()}")
        time.sleep(0.05)
    time.sleep(SETTLE)


def drain(
    clusters: list[Cluster], jobs: int, workdir: Path, concurrency: int = 16, each: bool = False
) -> dict[str, float]:
    """``jobs`` no-ops split over ``clusters``, drained by one runworker serving them,
    counted from the moment it listens on each (its start-up left out)."""
    system = JobQueue()
    share = jobs // len(clusters)
    conns = []
    for cluster in clusters:
        conns.append(cluster.server.connect(cluster.fresh()))
    extra = {"DJANGO_SETTINGS_MODULE": SETTINGS} if len(clusters) > 1 else {}
    if len(clusters) > 1:
        extra["BENCH_SHARD_B_URL"] = clusters[1].proxied()
    env = child_env(system, clusters[0].proxied(), extra)
    worker = Worker(system.worker_argv(concurrency), env, workdir / f"worker-{len(clusters)}.log")
    try:
        _wait_listening(worker, conns)
        before = _cpu(worker, conns)
        for cluster in clusters:
            cluster.proxy.reset()
        started = time.monotonic()
        enqueuers = [
            threading.Thread(
                target=run_agent,
                args=(system, c.server.url(NAME), "enqueue_each" if each else "preload"),
                kwargs={"params": {"n": share}, "timeout": 600.0},
            )
            for c in clusters
        ]
        for thread in enqueuers:
            thread.start()
        if not each:  # the whole backlog first, as bench's drains
            for thread in enqueuers:
                thread.join()
        after = dict(before)
        while True:
            left = sum(system.remaining(conn, share) for conn in conns)
            for pid, used in _cpu(worker, conns).items():
                after[pid] = max(after.get(pid, 0.0), used)
            # <= 0: bench's enqueue_each makes ten untimed jobs before its n
            if left <= 0 and not any(thread.is_alive() for thread in enqueuers):
                break
            if not worker.alive() or time.monotonic() - started > DRAIN_TIMEOUT:
                raise RuntimeError(f"the drain did not finish:\n{worker.describe()}")
            time.sleep(0.1)
        seconds = time.monotonic() - started
        statements = sum(c.proxy.counts().statements for c in clusters)
        workers = set(tree(worker.popen.pid))
    finally:
        worker.stop()
        for conn in conns:
            conn.close()
    done = share * len(clusters) - left  # the jobs completed
    spent = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
    return {
        "jobs": done,
        "statements_per_job": statements / done,
        "cpu_ms_per_job": 1000 * sum(v for p, v in spent.items() if p in workers) / done,
        "server_cpu_ms_per_job": 1000 * sum(v for p, v in spent.items() if p not in workers) / done,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.shards", description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=10_000, help="no-ops per drain")
    p.add_argument("--reps", type=int, default=3, help="drains of each layout")
    p.add_argument(
        "--each",
        action="store_true",
        help="enqueue one job per transaction while the worker drains (not a backlog first)",
    )
    p.add_argument("--concurrency", type=int, default=16, help="runworker --concurrency")
    p.add_argument("--ports", default="5521,5522", help="the two clusters' ports")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    ports = [int(port) for port in args.ports.split(",")]
    if len(ports) != 2 or args.jobs < 2 or args.reps < 1 or args.concurrency < 1:
        p.error("--ports: two ports; --jobs: 2 or more; --reps, --concurrency: 1 or more")
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
                runs[layout].append(drain(chosen, args.jobs, workdir, args.concurrency, args.each))
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
