"""``runworker --processes N``: one parent that keeps N worker processes running.

The parent holds no database connection and runs no task. Its first children are forked
from it (``start``, under ``runworker``): at that point it has set Django up and checked
the options, and holds no thread, no connection and no lock, so a child starts with
Django already set up instead of setting it up again beside its sibling (half a second
or more of CPU each, which on a two-core machine delayed the first run of
``--processes 2`` by about that much against ``--processes 1``). Every child started
later (a restart, a recycle) is a fresh interpreter (``python -m django runworker …
--supervised``, so nothing the parent opened since is inherited): by then the parent has
threads, which a fork must not copy mid-use. The parent restarts a child that dies, with
a backoff so a crash loop does not spin, and says why it died; forwards SIGTERM/SIGINT
for a graceful stop of all; and starts a new child in place of one that recycled itself
(after ``--max-jobs-per-child`` jobs, or above ``--max-memory-per-child`` MiB), which
exits like a stopped worker: its runs finish or are released, never lost. Each child is
a worker of its own, with its own heartbeat row (host and pid), so the admin's worker
list shows every one.

A child that is alive but no longer answers (stopped by SIGSTOP, or frozen so that not
even its watcher thread runs) is not dead to ``poll()``: each child pings its parent
through a pipe every ``PING_INTERVAL``, and one silent for its ``liveness`` bound is
killed and replaced like a crashed one. The bound is a third of the lease: a child
silent that long has missed the lease renewal it owed its jobs.

A child that dies (a crash, a kill, the liveness bound) is a death the parent knows of
at once: ``on_death`` (``recover_at_once`` under ``runworker``) sends the jobs it held
back to pending within a second, as a stale recovery would after their leases
(guarded: a run of the dead child that somehow still settles is refused), and marks
its registry row stopped. That is the only time the parent opens a database
connection, on a thread of its own, closed again at once.

The child's side is here too (``Supervised``): its signals, and a watcher thread that
stops it gracefully when its memory passes the bound or its parent is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

from django_jobqueue.worker.handlers import SignalWork
from django_jobqueue.worker.spawning import PING_FD_ENV, Process, fork, spawn

logger = logging.getLogger("django_jobqueue")

# A child's exit status says why it ended, so the parent can tell a recycle from a crash.
EXIT_STOPPED = 0  # told to stop (or a burst ran out of work): not restarted
EXIT_RECYCLE_JOBS = 3  # ran its --max-jobs-per-child jobs: replaced at once
EXIT_RECYCLE_MEMORY = 4  # passed --max-memory-per-child: replaced at once
RECYCLED = {EXIT_RECYCLE_JOBS: "ran its job quota", EXIT_RECYCLE_MEMORY: "passed its memory bound"}

# The restart backoff after a crash: doubled per crash in a row, reset once a child has
# lived for BACKOFF_RESET seconds.
BACKOFF_FIRST = 0.5
BACKOFF_CAP = 30.0
BACKOFF_RESET = 60.0
# How much longer than the workers' shutdown timeout the parent waits before it kills a
# child that has not exited (its settle and release take a round trip or two).
STOP_GRACE = 10.0
# A signal arriving this soon after the first is the same stop delivered twice (a
# process-group kill reaching a child directly and through its parent), not a second one.
DUPLICATE_SIGNAL = 1.0
# A child pings its parent this often (from its watcher thread); the parent watches a
# child only once it has pinged (start-up, Django's included, is not timed), and never
# with a bound under LIVENESS_FLOOR, so scheduler hiccups on a loaded host kill nothing.
PING_INTERVAL = 1.0
LIVENESS_FLOOR = 5 * PING_INTERVAL


def liveness_bound(lease_seconds: float) -> float:
    """How long a child may stay silent before it is killed: a third of the lease (when
    a worker renews its leases), at least ``LIVENESS_FLOOR``."""
    return max(lease_seconds / 3, LIVENESS_FLOOR)


def reason(returncode: int) -> str:
    """Why a child ended, in words, from its exit status."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    if returncode in RECYCLED:
        return RECYCLED[returncode]
    return f"exited with status {returncode}"


@dataclass
class Child:
    """One worker process the supervisor runs, in the place (``slot``) it keeps filled."""

    slot: int
    popen: Process
    ping: int  # the read end of the pipe the child pings through (non-blocking)
    started: float = field(default_factory=time.monotonic)
    last_ping: float | None = None  # None: it has not pinged yet

    def heard(self, now: float) -> None:
        """Drain whatever the child sent; note when, if anything."""
        try:
            while os.read(self.ping, 4096):
                self.last_ping = now
        except BlockingIOError:
            pass
        except OSError:
            return

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.ping)

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass
class Supervisor:
    """Keeps ``count`` children running ``argv`` (the child's command line) until stopped.

    ``burst`` children that exit having drained the queue are not replaced; the
    supervisor returns once all are gone.
    """

    argv: Sequence[str]
    count: int
    shutdown_timeout: float
    burst: bool = False
    liveness: float = LIVENESS_FLOOR
    children: dict[int, Child] = field(default_factory=dict)
    restarts: int = 0
    _stopping: threading.Event = field(default_factory=threading.Event)
    _crashes: dict[int, int] = field(default_factory=dict)
    _due: dict[int, float] = field(default_factory=dict)  # slot -> when to restart it
    _signals: int = 0
    # Called (on a thread of its own) with a child's pid and why it died, for each child
    # that ended other than by a graceful stop or a recycle.
    on_death: Callable[[int, str], None] | None = None
    # Each slot's own command line, cycled (a worker serving every queue database runs
    # its processes for each): none, ``argv`` for every slot.
    argvs: Sequence[Sequence[str]] = ()
    # Runs a child's command line in a process forked from this one, returning its exit
    # status (``start`` forks while this process has no other thread); None: every child
    # is a fresh interpreter.
    run_forked: Callable[[Sequence[str]], int] | None = None

    def install_signal_handlers(self) -> None:
        self._signal_work = SignalWork("jobqueue-signal")
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            logger.warning("second signal: killing every worker process now")
            self._send(signal.SIGKILL)
            return
        logger.info("signal %s: stopping %d worker processes", signum, len(self.children))
        self._signal_work.soon(self.stop)  # not here: see worker.handlers

    def stop(self) -> None:
        """Stop every child gracefully (each gets SIGTERM and its shutdown timeout)."""
        if not self._stopping.is_set():
            self._stopping.set()
            self._send(signal.SIGTERM)

    def start(self) -> None:
        """Start every child not started yet: forked (with ``run_forked``) while this
        process has no thread but its main one, else as fresh interpreters. Called
        before ``install_signal_handlers``, whose thread would rule the fork out."""
        if not self.children:
            logger.info("supervisor %d starting %d worker processes", os.getpid(), self.count)
        for slot in range(self.count):
            if slot not in self.children:
                self._start(slot, forked=threading.active_count() == 1)

    def run(self) -> int:
        """Run until stopped (or, for a burst, until every child is done); returns how many
        children were started in place of others."""
        self.start()
        while not self._stopping.is_set():
            self._reap()
            self._kill_silent()
            if self.burst and not self.children and not self._due:
                break
            self._restart_due()
            self._stopping.wait(0.1)
        self._wait_all()
        logger.info("supervisor %d stopped (%d restarts)", os.getpid(), self.restarts)
        return self.restarts

    def _start(self, slot: int, *, forked: bool = False) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        try:
            argv = self.argvs[slot % len(self.argvs)] if self.argvs else self.argv
            if forked and self.run_forked is not None:
                others = [child.ping for child in self.children.values()]
                popen: Process = fork(self.run_forked, argv, write, closed=[read, *others])
            else:
                popen = spawn(argv, write)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        child = Child(slot=slot, popen=popen, ping=read)
        self.children[slot] = child
        logger.info("worker process %d started (pid %d)", slot, child.pid)

    def _kill_silent(self) -> None:
        """Kill each child silent for longer than ``liveness`` (``_reap`` then sees it
        killed and restarts it, with the crash backoff)."""
        now = time.monotonic()
        for child in list(self.children.values()):
            child.heard(now)
            if child.last_ping is None or now - child.last_ping <= self.liveness:
                continue
            logger.warning(
                "worker process %d (pid %d) has not answered for %.1fs (bound %.1fs): killing it",
                child.slot,
                child.pid,
                now - child.last_ping,
                self.liveness,
            )
            child.last_ping = None  # killed once; _reap restarts it
            with contextlib.suppress(ProcessLookupError):
                child.popen.kill()

    def _reap(self) -> None:
        for slot, child in list(self.children.items()):
            code = child.popen.poll()
            if code is None:
                continue
            del self.children[slot]
            child.close()
            if self._stopping.is_set():
                continue
            if code == EXIT_STOPPED and self.burst:
                logger.info("worker process %d (pid %d) done", slot, child.pid)
                continue
            if code != EXIT_STOPPED and code not in RECYCLED and self.on_death is not None:
                threading.Thread(
                    target=self.on_death,
                    args=(child.pid, reason(code)),
                    name="jobqueue-recover",
                    daemon=True,
                ).start()
            self._schedule(child, code)

    def _schedule(self, child: Child, code: int) -> None:
        """Plan the restart of a child that ended: at once for a recycle, else after a
        backoff that grows with each crash in a row of that slot."""
        lived = time.monotonic() - child.started
        if code in RECYCLED:
            delay = 0.0
            self._crashes[child.slot] = 0
            log = logger.info
        else:
            crashes = 0 if lived >= BACKOFF_RESET else self._crashes.get(child.slot, 0)
            delay = min(BACKOFF_FIRST * 2**crashes, BACKOFF_CAP)
            self._crashes[child.slot] = crashes + 1
            log = logger.warning
        log(
            "worker process %d (pid %d) %s after %.1fs; restarting in %.1fs",
            child.slot,
            child.pid,
            reason(code),
            lived,
            delay,
        )
        self._due[child.slot] = time.monotonic() + delay

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot, when in list(self._due.items()):
            if when <= now:
                del self._due[slot]
                self.restarts += 1
                self._start(slot)

    def _send(self, sig: signal.Signals) -> None:
        for child in list(self.children.values()):
            if child.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.popen.send_signal(sig)

    def _wait_all(self) -> None:
        """Wait for the children told to stop; kill one still there past its grace."""
        self._due.clear()
        deadline = time.monotonic() + self.shutdown_timeout + STOP_GRACE
        for child in list(self.children.values()):
            pid = child.pid
            try:
                code = child.popen.wait(max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                logger.error("worker process %d (pid %d) did not stop: killed", child.slot, pid)
                child.popen.kill()
                code = child.popen.wait()
            child.close()
            logger.info("worker process %d (pid %d) stopped: %s", child.slot, pid, reason(code))
        self.children.clear()


def recover_at_once(pid: int, cause: str) -> None:
    """A supervised worker process died (``cause``): recover the jobs it held now and
    mark its registry row stopped, on a connection closed again at once. A failure is
    logged, never raised: the jobs then come back when their leases run out."""
    from django.db import connections

    from django_jobqueue import routing, store
    from django_jobqueue.task.registry import policy_for

    host = socket.gethostname()
    # On every queue database (it served one of them; the others hold nothing of its).
    for alias in routing.each():
        try:
            found = store.recover_lost(
                worker_id=f"{host}:{pid}", cause=cause, policy_for=policy_for
            )
            store.mark_gone(pid=pid, host=host)
        except Exception:
            logger.exception(
                "could not recover the jobs of worker process %d on %s: left to their leases",
                pid,
                alias,
            )
            continue
        finally:
            connections[alias].close()
        logger.warning(
            "worker process %d %s: %d of its jobs recovered at once on %s", pid, cause, found, alias
        )


def current_rss_mib() -> float:
    """This process's resident memory in MiB: current where /proc tells it, else peak."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


class Supervised:
    """A worker's side of supervision: ``stop`` is the worker's graceful stop.

    Its signals: the first stops the worker, one within ``DUPLICATE_SIGNAL`` of it is
    the same stop twice and is ignored, a later one exits at once. Its watcher stops the
    worker when its memory passes ``max_memory_mib`` or its parent is gone (no worker
    outlives a killed supervisor by more than a graceful stop).
    """

    def __init__(self, stop: Callable[[], None], *, max_memory_mib: int | None) -> None:
        self.stop = stop
        self.max_memory_mib = max_memory_mib
        self.parent = os.getppid()
        self.memory_exceeded = False
        self._first_signal: float | None = None
        self._done = threading.Event()
        self._ping = _ping_fd()
        if self._ping is not None:
            # Never block the watcher on a parent that stopped reading.
            with contextlib.suppress(OSError):
                os.set_blocking(self._ping, False)

    def install(self) -> None:
        self._signal_work = SignalWork("jobqueue-signal")
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        threading.Thread(target=self._watch, name="jobqueue-supervised", daemon=True).start()

    def finish(self) -> None:
        self._done.set()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self._first_signal is None:
            self._first_signal = now
            logger.info("signal %s: stopping", signum)
            self._signal_work.soon(self.stop)  # not here: see worker.handlers
        elif now - self._first_signal > DUPLICATE_SIGNAL:
            logger.warning("second signal: exiting now; running jobs recover when leases expire")
            os._exit(1)

    def _send_ping(self) -> bool:
        """One byte to the parent: this process still runs. False when the parent is
        gone (its end of the pipe closed with it), which a child still starting when its
        supervisor died cannot tell from ``getppid`` (it read its new parent, init, as
        its own). A full pipe (the parent reads every tenth of a second) is no reason to
        fail."""
        if self._ping is None:
            return True
        try:
            os.write(self._ping, b".")
        except BrokenPipeError:
            return False
        except OSError:
            pass
        return True

    def _watch(self) -> None:
        gone = not self._send_ping()
        while gone or not self._done.wait(PING_INTERVAL):
            if gone or not self._send_ping() or os.getppid() != self.parent:
                logger.warning("supervisor %d is gone: stopping", self.parent)
                self.stop()
                return
            if self.max_memory_mib is not None:
                rss = current_rss_mib()
                if rss > self.max_memory_mib:
                    logger.warning(
                        "resident memory %.0f MiB is over --max-memory-per-child %d MiB: "
                        "recycling this worker process",
                        rss,
                        self.max_memory_mib,
                    )
                    self.memory_exceeded = True
                    self.stop()
                    return


def _ping_fd() -> int | None:
    """The pipe a supervised child pings its parent through (None: no parent asked)."""
    value = os.environ.pop(PING_FD_ENV, None)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
