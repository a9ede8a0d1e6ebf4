"""PostgreSQL restarts (and goes away for a while) under running workers and producers.

A throw-away server (``pgserver.py``), never the shared one: two ``runworker`` children
and two producer processes work against it while it is restarted with ``pg_ctl restart
-m fast`` and later stopped for two seconds and started again. The workers must come
back by themselves, LISTEN connection included; the only enqueues missing at the end
are ones that raised; every job that exists completed exactly once; nothing is left
claimed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos import pgserver
from tests.concurrency.procs import REPO_ROOT, WorkerProcesses

pytestmark = [
    pytest.mark.chaos,
    pytest.mark.skipif(pgserver.unavailable() is not None, reason=str(pgserver.unavailable())),
]

DBNAME = "jobqueue_restart"
WORKERS = 2
PRODUCERS = 2
PRODUCE_SECONDS = 14.0


@pytest.fixture
def server() -> Iterator[pgserver.ThrowawayPostgres]:
    pg = pgserver.ThrowawayPostgres()
    try:
        pg.init()
        pg.start()
        pg.create_database(DBNAME)
        yield pg
    finally:
        pg.close()


def child_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.getenv("PYTHONPATH")])]),
        "DATABASE_URL": url,
        "PYTHONUNBUFFERED": "1",
    }


def query(url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(statement).fetchall()


def wait_until(what: str, predicate: Any, timeout: float, describe: Any = str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout}s\n{describe()}")
        time.sleep(0.1)


def producer(url: str, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.producer", "--seconds", str(seconds)],
            cwd=REPO_ROOT,
            env=child_env(url),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
        )


def attempts(out: Path) -> tuple[set[str], int]:
    """The ids of the enqueues that returned, and how many raised."""
    ok: set[str] = set()
    raised = 0
    for line in out.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "ok":
            ok.add(parts[2])
        elif len(parts) == 3 and parts[1] == "raised":
            raised += 1
        else:
            pytest.fail(f"producer wrote {line!r}:\n{out.read_text()[-3000:]}")
    return ok, raised


@pytest.mark.timeout(300)
def test_workers_and_producers_ride_out_a_postgres_restart_and_nothing_is_lost(
    server: pgserver.ThrowawayPostgres, tmp_path: Path
) -> None:
    url = server.url(DBNAME)
    migrate = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--verbosity", "0"],
        cwd=REPO_ROOT,
        env=child_env(url),
        capture_output=True,
        text=True,
        check=False,
    )
    assert migrate.returncode == 0, migrate.stdout + migrate.stderr

    procs = WorkerProcesses(tmp_path, database=url)
    producers: list[subprocess.Popen[bytes]] = []
    try:
        run_and_check(server, url, procs, producers, tmp_path)
    finally:
        procs.close()
        for p in producers:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def run_and_check(
    server: pgserver.ThrowawayPostgres,
    url: str,
    procs: WorkerProcesses,
    producers: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    # A poll interval far longer than the test: work is found by NOTIFY (or a recovery).
    workers = [procs.start("--concurrency", "2", "--poll-interval", "600") for _ in range(WORKERS)]
    wait_until(
        "workers listening", lambda: all(w.listenings() for w in workers), 60, procs.describe
    )
    outs = [tmp_path / f"producer-{i}.out" for i in range(PRODUCERS)]
    producers += [producer(url, out, PRODUCE_SECONDS) for out in outs]

    def completed() -> int:
        return int(
            query(url, "SELECT count(*) FROM django_jobqueue_job WHERE status = 'completed'")[0][0]
        )

    wait_until("first jobs completed", lambda: completed() >= 20, 60, procs.describe)
    server.restart()
    time.sleep(3)
    server.stop("fast")
    time.sleep(2)  # down: enqueues raise, workers retry with backoff
    server.start()

    for p, out in zip(producers, outs, strict=True):
        assert p.wait(120) == 0, out.read_text()[-3000:]
    ok: set[str] = set()
    raised = 0
    for out in outs:
        ids, n = attempts(out)
        ok |= ids
        raised += n
    assert raised >= 1, "no enqueue ran into the server being down"

    def settled() -> bool:
        rows = query(url, "SELECT count(*) FROM django_jobqueue_job WHERE status <> 'completed'")
        return bool(rows[0][0] == 0)

    wait_until("every job completed", settled, 120, procs.describe)
    # The restarts cut every connection: LISTEN was issued again, on new connections.
    wait_until(
        "workers listening again",
        lambda: all(w.listenings() >= 2 for w in workers),
        30,
        procs.describe,
    )
    for w in workers:
        assert w.alive(), w.describe()
        assert "database connection restored" in w.log(), w.describe()
    check_nothing_lost(url, ok, raised)

    # And a job enqueued now is picked up through NOTIFY again.
    late = tmp_path / "late.out"
    producers.append(producer(url, late, 0))
    assert producers[-1].wait(60) == 0, late.read_text()
    [job_id] = attempts(late)[0]
    wait_until(
        "the late job completed",
        lambda: (
            query(url, f"SELECT status FROM django_jobqueue_job WHERE id = '{job_id}'")
            == [("completed",)]
        ),
        30,
        procs.describe,
    )


def check_nothing_lost(url: str, ok: set[str], raised: int) -> None:
    jobs = {str(i): s for i, s in query(url, "SELECT id, status FROM django_jobqueue_job")}
    missing = ok - set(jobs)
    assert not missing, f"{len(missing)} enqueues that returned have no job"
    # A job whose enqueue raised may still exist (the commit made it, its answer did not).
    assert len(jobs) - len(ok) <= raised
    assert set(jobs.values()) == {"completed"}
    completions = query(
        url,
        "SELECT j.id, count(e.id) FROM django_jobqueue_job j"
        " LEFT JOIN django_jobqueue_journalentry e ON e.job_id = j.id"
        " AND e.outcome = 'completed' GROUP BY j.id",
    )
    assert {n for _, n in completions} == {1}, "a job completed more than once, or never"
    [(claimed,)] = query(url, "SELECT count(*) FROM django_jobqueue_job WHERE status = 'claimed'")
    assert claimed == 0
    print(f"enqueues: {len(ok)} returned, {raised} raised; jobs in the table: {len(jobs)}")
