"""A PgBouncer of the tests' own, in transaction-pooling mode, in front of the test
database; and a ``DATABASES`` alias that reaches it.

The server is Debian's ``pgbouncer`` (``scripts/test.sh`` installs it where it can);
without it these tests skip, saying why. It listens on a free local port with a
generated configuration: trust authentication (the user still has to be in its auth
file), ``pool_mode = transaction`` and a pool of ``POOL_SIZE`` server sessions per
database, so that clients really share them. PgBouncer refuses to run as root: as
root it is started as ``nobody``, which is why its files sit in a world-readable
directory of their own.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings

from tests.concurrency.procs import WorkerProcesses
from tests.helpers import is_postgres

PGBOUNCER = shutil.which("pgbouncer") or next(
    (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None
)

#: Server sessions per (database, user): fewer than the clients the tests open.
POOL_SIZE = 2

#: The alias the ``pooled`` fixture adds to DATABASES.
POOLED = "pooled"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PgBouncer:
    """One running pgbouncer process in front of the database of ``target`` (a Django
    settings dict)."""

    def __init__(self, target: dict[str, Any]) -> None:
        assert PGBOUNCER is not None
        self.user = target.get("USER") or "postgres"
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="jobqueue-pgbouncer-"))
        self.dir.chmod(0o755)
        server = f"host={target.get('HOST') or '127.0.0.1'} port={target.get('PORT') or 5432}"
        if target.get("PASSWORD"):
            server += f" user={self.user} password={target['PASSWORD']}"
        self._write("users.txt", f'"{self.user}" ""\n')
        self._write(
            "pgbouncer.ini",
            f"""[databases]
* = {server}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / "users.txt"}
admin_users = {self.user}
pool_mode = transaction
default_pool_size = {POOL_SIZE}
reserve_pool_size = 0
max_client_conn = 500
""",
        )
        self.log_path = self.dir / "pgbouncer.log"
        self._log = self.log_path.open("wb")
        as_user = ["-u", "nobody"] if os.geteuid() == 0 else []
        self.popen = subprocess.Popen(
            [PGBOUNCER, *as_user, str(self.dir / "pgbouncer.ini")],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _write(self, name: str, text: str) -> None:
        path = self.dir / name
        path.write_text(text)
        path.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)

    def _wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.popen.poll() is not None:
                pytest.fail(f"pgbouncer exited at start-up:\n{self.log()}")
            try:
                self.show("VERSION")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    pytest.fail(f"pgbouncer did not accept connections:\n{self.log()}")
                time.sleep(0.05)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def url(self, database: str) -> str:
        """A DATABASE_URL for ``database`` through the pooler."""
        return f"postgres://{quote(self.user, safe='')}@127.0.0.1:{self.port}/{quote(database)}"

    def show(self, what: str) -> list[dict[str, Any]]:
        """``SHOW what`` on PgBouncer's admin console, as dicts."""
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=self.user, dbname="pgbouncer", autocommit=True
        ) as conn:
            cursor = conn.execute(f"SHOW {what}")
            names = [c.name for c in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def sessions(self, database: str) -> tuple[int, int]:
        """(client connections, server sessions) PgBouncer has for ``database`` now."""
        clients = sum(1 for c in self.show("CLIENTS") if c["database"] == database)
        servers = sum(1 for s in self.show("SERVERS") if s["database"] == database)
        return clients, servers

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pgbouncer(django_db_setup: None) -> Iterator[PgBouncer]:
    """PgBouncer in transaction mode in front of the test database's server."""
    if not is_postgres():
        pytest.skip("PgBouncer sits in front of PostgreSQL only")
    if PGBOUNCER is None:
        pytest.skip("no pgbouncer on PATH (Debian: apt-get install pgbouncer)")
    bouncer = PgBouncer(dict(connections["default"].settings_dict))
    try:
        yield bouncer
    finally:
        bouncer.stop()


@pytest.fixture(scope="module")
def pooled_alias(pgbouncer: PgBouncer) -> Iterator[str]:
    """A DATABASES alias, ``pooled``, reaching the test database through PgBouncer and
    saying so as Django asks (``DISABLE_SERVER_SIDE_CURSORS``).

    Added once the test database exists, for one module: its tests name it in their
    ``django_db(databases=...)``. A test mirror of ``default`` for pytest-django, so
    that it is never created nor flushed on its own (it is the same database).
    """
    direct = connections["default"].settings_dict
    settings.DATABASES[POOLED] = {
        **direct,
        "HOST": "127.0.0.1",
        "PORT": str(pgbouncer.port),
        "DISABLE_SERVER_SIDE_CURSORS": True,
        "OPTIONS": dict(direct.get("OPTIONS") or {}),
        "TEST": {**direct.get("TEST", {}), "MIRROR": "default"},
    }
    try:
        yield POOLED
    finally:
        connections[POOLED].close()
        del connections[POOLED]
        del settings.DATABASES[POOLED]


@pytest.fixture
def pooled(transactional_db: None, pooled_alias: str) -> Iterator[str]:
    """The jobs database for the test is ``pooled``, with ``LISTEN_DATABASE`` the
    direct ``default``."""
    jobqueue = {**settings.JOBQUEUE, "DATABASE": pooled_alias, "LISTEN_DATABASE": "default"}
    with override_settings(JOBQUEUE=jobqueue):
        yield pooled_alias


@pytest.fixture
def runworker(transactional_db: None, tmp_path: Path) -> Iterator[WorkerProcesses]:
    """``runworker`` children (the concurrency tier's fixture); killed at teardown,
    before the database is flushed."""
    procs = WorkerProcesses(tmp_path)
    try:
        yield procs
    finally:
        procs.close()
