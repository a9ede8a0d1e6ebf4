"""A throw-away PostgreSQL server for tests that must restart the database.

The shared server the rest of the suite uses is never stopped: this one is made with
``initdb`` in a temporary directory, listens on a free port of 127.0.0.1, and is
removed at the end. ``initdb`` refuses to run as root, so as root every server command
runs as the ``postgres`` OS user (the owner of the directory).
"""

from __future__ import annotations

import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

# Where distributions put the server binaries when they are not on PATH (Debian and
# Ubuntu: one directory per major version).
_BINDIR_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin")


def find_bindir() -> Path | None:
    """A directory holding ``initdb`` and ``pg_ctl`` (the newest version found), or None."""
    candidates: list[str] = []
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(os.path.dirname(on_path))
    for pattern in _BINDIR_GLOBS:
        candidates += sorted(glob.glob(pattern), key=_version, reverse=True)
    for directory in candidates:
        if all(os.access(os.path.join(directory, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            return Path(directory)
    return None


def _version(path: str) -> tuple[int, ...]:
    digits = "".join(c if c.isdigit() else " " for c in path).split()
    return tuple(int(d) for d in digits)


def unavailable() -> str | None:
    """Why a throw-away server cannot be made here (None: it can)."""
    if find_bindir() is None:
        return "the PostgreSQL server binaries (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run initdb as"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ThrowawayPostgres:
    """``initdb`` + ``pg_ctl`` on a temporary directory and a free port."""

    def __init__(self, port: int | None = None) -> None:
        """``port``: the one to listen on (default: a free one)."""
        bindir = find_bindir()
        assert bindir is not None, unavailable()
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="jobqueue-pg-"))
        self.data = self.root / "data"
        self.logfile = self.root / "server.log"
        self.port = free_port() if port is None else port
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
        os.chmod(self.root, 0o700)

    def url(self, dbname: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def _run(self, *args: str, timeout: float = 120) -> str:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.as_postgres:
            if shutil.which("runuser"):
                command = ["runuser", "-u", "postgres", "--", *command]
            else:
                command = ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(command)]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=self.root, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}\n"
                f"{self.log()}"
            )
        return done.stdout

    def log(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def init(self, *settings: str) -> None:
        """``initdb``; ``settings`` (``"name=value"``) are passed to the server as ``-c``."""
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
            " -c fsync=off -c full_page_writes=off -c max_connections=100"
        ) + "".join(f" -c {shlex.quote(s)}" for s in settings)
        self._pg_ctl_start = ["-o", options]

    def _pg_ctl(self, action: str, *extra: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-w", *extra, action)

    def start(self) -> None:
        self._pg_ctl("start", *self._pg_ctl_start)

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is cut, the server comes back."""
        self._pg_ctl("restart", "-m", "fast", *self._pg_ctl_start)

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-m", mode)

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def close(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
