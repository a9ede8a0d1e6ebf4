"""The live side's costs, on a local PostgreSQL (``python -m bench.live``):

- ``wait``: how soon ``JobHandle.wait()`` returns after its job's settlement. One
  ``runworker`` at its defaults; jobs enqueued one at a time, each waited for; the
  latency is the moment ``wait()`` returned less the job's ``finished_at`` (the
  settlement's own time, taken just before its commit), p50/p95/p99 in ms.
- ``drain``: the no-op drain of two ``runworker`` processes with and without an open
  dashboard, interleaved. "Open" is the admin's own event-stream view
  (``admin.live``), driven in this process through Django's test client, and on each
  event the dashboard rendered again, as the page's script would fetch it. The ratio
  (with ÷ without) is the live page's cost to the queue.

Each run has a database of its own, created and dropped here. Options: ``--jobs N``,
``--rounds N`` (drain), ``--database-url URL`` (an admin URL of a loopback server).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.pg import Server

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
SETTINGS = "bench.djangoproject.settings_live"
REPO = Path(__file__).resolve().parents[1]


def _setup(server: Server, name: str) -> str:
    server.create(name)
    url = server.url(name)
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url


def _workers(n: int, log_dir: Path) -> list[Any]:
    from bench.procs import Worker

    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, "-m", "django", "runworker"]
    return [Worker(argv, env, log_dir / f"live-worker-{i}.log") for i in range(n)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait_latency(jobs: int, log_dir: Path) -> dict[str, float]:
    from bench.benchapp.tasks import noop

    workers = _workers(1, log_dir)
    try:
        noop.enqueue().wait(timeout=60)  # the worker is up and the listener connected
        latencies = []
        for _ in range(jobs):
            handle = noop.enqueue()
            handle.wait(timeout=60)
            returned = time.time()
            assert handle.finished_at is not None
            latencies.append((returned - handle.finished_at.timestamp()) * 1000)
            time.sleep(0.02)  # the worker idle again, as a waiter would find it
    finally:
        for w in workers:
            w.stop()
    return {
        "p50": statistics.median(latencies),
        "p95": _percentile(latencies, 0.95),
        "p99": _percentile(latencies, 0.99),
        "max": max(latencies),
    }


def _dashboard(stop: threading.Event, counts: dict[str, int]) -> None:
    """An open dashboard: its event stream read, and the page rendered on each event."""
    from django.contrib.auth.models import User
    from django.db import connections
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="bench-live"))
    try:
        while not stop.is_set():
            response = client.get("/admin/django_jobqueue/job/dashboard/live/")
            for chunk in response.streaming_content:  # type: ignore[attr-defined]
                if stop.is_set():
                    break
                if b"event: change" in chunk:
                    counts["events"] += 1
                    page = client.get("/admin/django_jobqueue/job/dashboard/")
                    counts["renders"] += page.status_code == 200
            response.close()
    finally:
        connections.close_all()


def _drain_once(n: int, log_dir: Path, *, dashboard: bool) -> tuple[float, dict[str, int]]:
    from bench.benchapp.tasks import noop
    from django_jobqueue.models import Job

    Job.objects.all().delete()
    noop.enqueue_many([{}] * n)
    counts = {"events": 0, "renders": 0}
    stop = threading.Event()
    viewer = threading.Thread(target=_dashboard, args=(stop, counts), daemon=True)
    if dashboard:
        viewer.start()
        time.sleep(1.0)  # its stream open
    workers = _workers(2, log_dir)
    try:
        first = last = None
        while True:
            done = Job.objects.filter(status="completed").count()
            now = time.monotonic()
            if done and first is None:
                first, at_first = now, done
            if done >= n:
                last = now
                break
            time.sleep(0.1)
    finally:
        for w in workers:
            w.stop()
        stop.set()
    assert first is not None
    assert last is not None
    return (n - at_first) / max(last - first, 1e-9), counts


def drain(jobs: int, rounds: int, log_dir: Path) -> dict[str, Any]:
    from django.contrib.auth.models import User

    User.objects.create_superuser("bench-live", password="unused-bench-pw")  # noqa: S106
    rates: dict[bool, list[float]] = {False: [], True: []}
    seen = []
    for _ in range(rounds):
        for dashboard in (False, True):
            rate, counts = _drain_once(jobs, log_dir, dashboard=dashboard)
            rates[dashboard].append(rate)
            if dashboard:
                seen.append(counts)
            print(
                f"  drain {'with' if dashboard else 'without'} a dashboard: {rate:,.0f} jobs/s"
                + (
                    f" ({counts['events']} events, {counts['renders']} renders)"
                    if dashboard
                    else ""
                )
            )
    without, with_ = statistics.median(rates[False]), statistics.median(rates[True])
    return {
        "without": without,
        "with": with_,
        "ratio": with_ / without,
        "rates": rates,
        "dashboard": seen,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__)
    parser.add_argument("measure", choices=["wait", "drain"])
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default=DEFAULT_URL)
    args = parser.parse_args(argv)
    server = Server(args.database_url)
    name = f"bench_live_{os.getpid()}"
    log_dir = Path(tempfile.gettempdir())
    _setup(server, name)
    try:
        if args.measure == "wait":
            found = wait_latency(args.jobs or 50, log_dir)
            print(
                "wait() after the settlement (ms): "
                + ", ".join(f"{k} {v:.1f}" for k, v in found.items())
            )
        else:
            found = drain(args.jobs or 20_000, args.rounds, log_dir)
            print(
                f"no-op drain, 2 workers: without a dashboard {found['without']:,.0f} jobs/s,"
                f" with one {found['with']:,.0f} jobs/s; ratio {found['ratio']:.3f}"
            )
    finally:
        from django.db import connections

        from django_jobqueue.store import listening

        listening.stop_all()
        connections.close_all()
        server.drop(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
