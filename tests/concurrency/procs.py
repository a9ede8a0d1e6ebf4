"""Real ``runworker`` child processes against the test database, for the concurrency tier.

A child gets ``DJANGO_SETTINGS_MODULE=tests.settings``, the repository root on its
``PYTHONPATH`` and a ``DATABASE_URL`` naming the database the test is using (the
test database pytest-django created), so it sees exactly the rows the test sees.
Its stderr (the worker's log) goes to a file that failures quote.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import IO
from urllib.parse import quote

import pytest
from django.db import connections

from django_jobqueue import routing
from django_jobqueue.models import WorkerHeartbeat
from django_jobqueue.worker import LISTENING

REPO_ROOT = Path(__file__).resolve().parents[2]
# How long a child may take to start (import Django, migrate nothing, register): seconds
# on a quiet machine, past 30 s on two cores shared by four lanes and other runs. A wait,
# not a pause: a child that starts sooner is used sooner, one that dies fails at once.
STARTUP_TIMEOUT = 90.0


def database_url(alias: str = "default") -> str:
    """A DATABASE_URL for the database ``alias`` points at now (the test database)."""
    s = connections[alias].settings_dict
    if connections[alias].vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"  # the test database's file (an absolute path)
    user = quote(s.get("USER") or "", safe="")
    password = quote(s.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = s.get("HOST") or "127.0.0.1"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    scheme = "mysql" if connections[alias].vendor == "mysql" else "postgres"
    return f"{scheme}://{auth}{host}{port}/{quote(s['NAME'], safe='')}"


def server_now() -> datetime:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        row = cursor.fetchone()
    assert row is not None
    value: datetime = row[0]
    return value


def registered_pids(pids: list[int], aliases: tuple[str, ...] | None = None) -> list[int]:
    """Those of ``pids`` with a live heartbeat row (a worker loop started, not stopped)
    on a queue database of ``aliases`` (default: every one), sorted."""
    found: set[int] = set()
    for alias in routing.aliases() if aliases is None else aliases:
        live = WorkerHeartbeat.objects.using(alias).filter(pid__in=pids, stopped_at__isnull=True)
        found.update(live.values_list("pid", flat=True))
    return sorted(found)


def terminate_other_backends(alias: str = "default") -> int:
    """``pg_terminate_backend`` every other connection to the test database (or to the
    database ``alias`` points at); how many."""
    with connections[alias].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


class WorkerProcess:
    """One ``python -m django runworker …`` child (on ``database``, else the test database)."""

    def __init__(
        self,
        args: list[str],
        log_path: Path,
        database: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = args
        self.log_path = log_path
        env = {
            **os.environ,
            **(env or {}),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": os.pathsep.join(
                [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
            "DATABASE_URL": database or database_url(),
            "PYTHONUNBUFFERED": "1",
        }
        self._log: IO[bytes] = log_path.open("wb")
        self.started_at = time.monotonic()
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "django", "runworker", *args],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def worker_id(self) -> str:
        """What the child writes to claimed_by and to its journal entries' worker."""
        return f"{socket.gethostname()}:{self.pid}"

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def describe(self) -> str:
        tail = "\n".join(self.log().splitlines()[-40:])
        return f"runworker {' '.join(self.args)} (pid {self.pid}, rc {self.popen.poll()}):\n{tail}"

    def age(self) -> float:
        """Seconds since the child was started."""
        return time.monotonic() - self.started_at

    def alive(self) -> bool:
        return self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Wait for the child to exit; fail the test (quoting its log) if it does not."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker did not exit within {timeout}s\n{self.describe()}")

    def children(self) -> list[int]:
        """The pids of this process's own children (a supervisor's worker processes)."""
        listing = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        try:
            return [int(pid) for pid in listing.read_text().split()]
        except OSError:  # gone, or no /proc (the campaigns run on Linux)
            return []

    def listenings(self) -> int:
        """How many times the child (its worker processes, for ``--processes``) has
        logged that it listens for new jobs: once a loop at start, again after each
        reconnect."""
        return self.log().count(LISTENING)

    def registered(self) -> bool:
        """Whether the child has registered its heartbeat row (its loop has started); for
        ``--processes`` (or several queue databases), whether one of its worker processes
        has, on any queue database."""
        return bool(registered_pids([self.pid, *self.children()]))

    def wait_registered(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Wait until the child has registered its heartbeat row (its loop is starting)."""
        deadline = time.monotonic() + timeout
        while not self.registered():
            if not self.alive():
                pytest.fail(f"worker exited during start-up\n{self.describe()}")
            if time.monotonic() > deadline:
                pytest.fail(f"worker did not register within {timeout}s\n{self.describe()}")
            time.sleep(0.05)

    def close(self) -> None:
        if self.alive():
            self.popen.kill()
        try:
            self.popen.wait(10)
        finally:
            self._log.close()


class WorkerProcesses:
    """Starts ``runworker`` children for one test and kills whatever is left at teardown."""

    def __init__(self, log_dir: Path, database: str | None = None) -> None:
        self.log_dir = log_dir
        self.database = database
        self.started: list[WorkerProcess] = []

    def start(self, *args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        """Start a child; ``env`` adds to (or overrides) its environment."""
        n = len(self.started)
        proc = WorkerProcess(
            list(args), self.log_dir / f"runworker-{n}.log", self.database, env=env
        )
        self.started.append(proc)
        return proc

    def start_ready(
        self, *args: str, count: int = 1, timeout: float = STARTUP_TIMEOUT
    ) -> list[WorkerProcess]:
        """Start ``count`` identical children and wait until each is registered and listening.

        Listening is what each logs once it has LISTENed (PostgreSQL; elsewhere workers
        poll, and registered is ready).
        """
        if connections["default"].vendor != "postgresql":
            procs = [self.start(*args) for _ in range(count)]
            for proc in procs:
                proc.wait_registered(timeout)
            return procs
        procs = [self.start(*args) for _ in range(count)]
        for proc in procs:
            proc.wait_registered(timeout)
        deadline = time.monotonic() + timeout
        while not all(proc.listenings() for proc in procs):
            for proc in procs:
                if not proc.alive():
                    pytest.fail(f"worker exited during start-up\n{proc.describe()}")
            if time.monotonic() > deadline:
                logs = "\n".join(p.describe() for p in procs)
                pytest.fail(f"workers not listening within {timeout}s\n{logs}")
            time.sleep(0.05)
        return procs

    def describe(self) -> str:
        return "\n".join(proc.describe() for proc in self.started)

    def close(self) -> None:
        for proc in self.started:
            proc.close()
