"""How a supervisor (``worker.supervisor``) starts a child: ``spawn``, a fresh
interpreter running the child's command line, or ``fork``, a copy of the supervisor that
runs it in process, for a supervisor that has set Django up and holds no thread, no
connection and no lock; ``Forked`` shows a forked child as ``Popen`` shows a spawned one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Protocol

# The environment variable naming the pipe a child pings through.
PING_FD_ENV = "JOBQUEUE_SUPERVISOR_PING_FD"


class Process(Protocol):
    """What the supervisor uses of a child process: ``subprocess.Popen``'s or ``Forked``'s."""

    pid: int
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


class Forked:
    """A child forked from the supervisor, as ``Popen`` shows a spawned one: its exit
    status once reaped (``poll``), ``wait``, and signals only while it has not been
    reaped (its pid is not yet anyone else's)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = 1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker process {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def spawn(argv: Sequence[str], ping_fd: int) -> subprocess.Popen[bytes]:
    """Start a child in a session of its own (a terminal's Ctrl-C reaches the parent,
    which forwards it once), with the parent's import path, logging to the parent's
    stderr; no file descriptor but the standard three and its ping pipe is inherited."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        PING_FD_ENV: str(ping_fd),
    }
    return subprocess.Popen(
        list(argv),
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        pass_fds=(ping_fd,),
    )


def fork(
    run: Callable[[Sequence[str]], int], argv: Sequence[str], ping_fd: int, *, closed: list[int]
) -> Forked:
    """Fork a child that runs ``argv`` through ``run`` and exits with its status: as
    ``spawn``'s, in a session of its own, stdin on /dev/null, pinging through
    ``ping_fd``; ``closed``: the parent's descriptors it must not hold (the read ends of
    the pings, its own and its siblings'). It leaves by ``os._exit``: the parent's exit
    handlers are the parent's."""
    pid = os.fork()
    if pid:
        return Forked(pid)
    code = 1
    try:
        os.setsid()
        for fd in closed:
            with contextlib.suppress(OSError):
                os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.environ[PING_FD_ENV] = str(ping_fd)
        code = run(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
