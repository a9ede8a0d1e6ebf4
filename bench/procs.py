"""Child processes: workers that run until stopped, and one-shot ``bench.agent`` calls.

The sources are byte-compiled first (``compile_sources``), as ``pip install`` compiles
a package. Children run from the repository root with it on PYTHONPATH, get
DATABASE_URL for the database under test (and DJANGO_SETTINGS_MODULE for the Django
systems), and write their output to a log file whose tail goes into error messages.
Each is stopped by its own pid: SIGTERM, then SIGKILL if it lingers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from bench.errors import BenchError
from bench.systems import System

REPO_ROOT = Path(__file__).resolve().parents[1]
STOP_GRACE = 5.0  # seconds between SIGTERM and SIGKILL


def compile_sources() -> None:
    """Byte-compile django_jobqueue and the bench's own modules into their
    ``__pycache__``, as ``pip install`` does for an installed package.

    The peers are installed by pip, compiled; a checkout of ours run with
    PYTHONDONTWRITEBYTECODE set (or a first run) compiled its 170-odd modules from
    source at every worker's start: 0.37 s to import instead of 0.27 s on the
    two-core machine, and a peak RSS up to 1 MiB higher, charged to the queue's start-up
    and memory but not what a user's installed worker pays. (compileall writes
    whatever PYTHONDONTWRITEBYTECODE says: that only governs the import system.)"""
    import compileall

    for package in ("django_jobqueue", "bench"):
        if not compileall.compile_dir(REPO_ROOT / package, quiet=1):
            raise BenchError(f"{package}: byte-compiling its sources failed")


def child_env(
    system: System, database_url: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    env["DATABASE_URL"] = database_url
    if system.settings_module:
        env["DJANGO_SETTINGS_MODULE"] = system.settings_module
    env.update(extra or {})
    return env


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class Worker:
    """One worker process of a system, logging to ``log_path``."""

    def __init__(
        self, argv: list[str], env: dict[str, str], log_path: Path, *, cwd: Path = REPO_ROOT
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("wb")
        self.started_at = time.time()  # a drain's start-up counts from here (bench/phases.py)
        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C reaches the harness only; it stops us
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def describe(self) -> str:
        self._log.flush()
        log = tail(self.log_path.read_text(errors="replace"))
        return f"{' '.join(self.argv[1:])} (pid {self.popen.pid}, exit {self.popen.poll()}):\n{log}"

    def logged(self, text: str) -> int:
        """How many times its log holds ``text`` so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace").count(text)

    def stop(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        self._log.close()


def run_agent(
    system: System,
    database_url: str,
    action: str,
    params: dict[str, Any],
    timeout: float,
    env: dict[str, str] | None = None,
) -> Any:
    """Run ``bench.agent`` for ``system`` and return its result; BenchError on failure;
    ``env`` adds to (or overrides) the child's environment."""
    argv = [sys.executable, "-m", "bench.agent", system.slug, action, json.dumps(params)]
    try:
        proc = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=child_env(system, database_url, env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{action} did not finish within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"]
        raise BenchError(f"{action} failed: {err[-1]}", tail(proc.stderr, 30))
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise BenchError(f"{action} printed no result", tail(proc.stderr, 30))
    return json.loads(lines[-1])["result"]
