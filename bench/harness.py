"""The harness: a database per measure, the worker processes, the drain's clock.

Every measure (bench/measures.py and the modules it gathers) runs per system and
repetition on a freshly created database.

A system is installed once per run into a template database (its migrations, or
pgqueuer's schema); every repetition of every measure then gets its own
``CREATE DATABASE bench_<slug>_<run>_<n> TEMPLATE bench_<slug>_<run>_template`` and
drops it afterwards, so no measure sees another's rows and none pays for migrating.
``<run>`` is the harness's pid, so that two runs at once do not drop each other's
databases.

Jobs preloaded for a drain are not followed by ``ANALYZE``: a user's bulk load is not
either, and autovacuum analyzes the table only at its next look (a minute at its
defaults, never where it is off, as on this server: the report shows it). The harness
once analyzed after every preload, and so never saw what a user met: a claim planned
on a table that looked empty read and sorted every pending row, and a 100,000-job
drain ran at a third of a 10,000-job one (our workers now gather the statistics
themselves: ``worker/services/statistics.py``). Just before the workers start, a
``CHECKPOINT`` flushes what the preload and earlier measures left dirty, so that no
checkpoint of theirs lands in the middle of a drain.

Drains are timed from outside, the same way for all systems: the harness polls the
database every 100 ms for the jobs not yet done; the clock starts at the first poll
that sees fewer than N left and stops at the first that sees none, and the rate is
the jobs done in between over that time. Worker start-up is thus never timed by that
clock; beside it, the drains of a preloaded backlog also report the whole run, the
steady rate and the start-up from the settlements' own timestamps (bench/phases.py). The
poll is slow on purpose: a count every 20 ms took a tenth of a core from the
systems under test on two cores; the last poll's lateness (at most 100 ms) makes
every rate a slight underestimate, the same for all. The quick form (CI's, which
checks that every measure runs, not how fast) may drain its small loads before the
first poll: such a drain has no rate (the table says "untimed", the JSON gives none).
In a full run, a drain that finished between two polls (jobs enqueued to waiting
workers, which a loaded machine's enqueue can be slower than) is timed by its
settlements' timestamps, first to last, where the store shows exactly its jobs; it is
refused otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.config import Config
from bench.errors import BenchError
from bench.pg import Conn, other_backends
from bench.phases import Phases
from bench.procs import Worker, child_env, run_agent
from bench.proxy import CountingProxy
from bench.results import Drained
from bench.stamps import ENV as STAMP_ENV
from bench.stamps import read_stamps
from bench.systems import System

STALL = 60.0  # seconds without progress before a drain is declared stuck
READY_TIMEOUT = 60.0  # seconds for a worker to connect (and LISTEN, where it does)
STAMP_TIMEOUT = 30.0  # seconds after the last enqueue for every stamp job to have started
AGENT_TIMEOUT = 1800.0
WARMUP_STAMPS = 5  # stamp jobs enqueued (and ignored) before the measured ones


class Bench:
    """One run's shared state: the server, a folder for logs, the proxy, database names."""

    def __init__(self, config: Config, workdir: Path) -> None:
        self.config = config
        self.sizes = config.sizes
        self.server = config.server
        self.workdir = workdir
        self.run_id = os.getpid()
        self._numbers = itertools.count(1)
        self._proxy: CountingProxy | None = None
        self._templates: list[str] = []

    def template(self, system: System) -> str:
        return f"bench_{system.slug}_{self.run_id}_template"

    def install(self, system: System) -> None:
        name = self.template(system)
        self.server.create(name)
        self._templates.append(name)
        self.agent(system, name, "install")

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.stop()
        for name in self._templates:
            self.server.drop(name)

    def proxy(self) -> CountingProxy:
        if self._proxy is None:
            self._proxy = CountingProxy(self.server.host, self.server.port)
            self._proxy.start()
        return self._proxy

    @contextlib.contextmanager
    def fresh(self, system: System) -> Iterator[str]:
        """A new database from the system's template, dropped on the way out."""
        name = f"bench_{system.slug}_{self.run_id}_{next(self._numbers)}"
        self.server.create(name, template=self.template(system))
        try:
            yield name
        finally:
            self.server.drop(name)

    def agent(
        self, system: System, db: str, action: str, env: dict[str, str] | None = None, **params: Any
    ) -> Any:
        return run_agent(system, self.server.url(db), action, params, AGENT_TIMEOUT, env)

    def preload(self, system: System, db: str, conn: Conn, n: int) -> None:
        """Enqueue ``n`` no-ops the system's fastest way (untimed) and check (no
        ANALYZE: see the module docstring)."""
        self.agent(system, db, "preload", n=n)
        left = system.remaining(conn, n)
        if left != n:
            raise BenchError(f"after preloading {n} jobs, {left} are pending")

    @contextlib.contextmanager
    def workers(
        self,
        system: System,
        db: str,
        count: int,
        *,
        proxied: bool = False,
        stamp_file: Path | None = None,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> Iterator[list[Worker]]:
        """``count`` worker processes on ``db`` (through the counting proxy if ``proxied``);
        ``argv`` instead of the system's own command line, ``env`` added to theirs."""
        url = (
            self.server.url(db, port=self.proxy().port, sslmode="disable")
            if proxied
            else self.server.url(db)
        )
        extra = {**(env or {}), **({STAMP_ENV: str(stamp_file)} if stamp_file else {})}
        env = child_env(system, url, extra)
        argv = argv or system.worker_argv(self.config.concurrency)
        started: list[Worker] = []
        try:
            for i in range(count):
                started.append(Worker(argv, env, self.workdir / f"{db}-worker{i}.log"))
            yield started
        finally:
            for worker in started:
                worker.stop()

    def wait_ready(self, system: System, conn: Conn, workers: list[Worker]) -> None:
        """Until the workers are connected (and LISTENing, for a system whose LISTEN
        shows in pg_stat_activity or in its workers' logs), then ``ready_settle`` more
        seconds."""
        deadline = time.monotonic() + READY_TIMEOUT
        prefix = system.listen_prefix
        while True:
            ready = system.ready(conn, len(workers))
            if ready is None and system.ready_line is not None:
                ready = all(w.logged(system.ready_line) for w in workers)
            if ready is None:
                queries = other_backends(conn)
                ready = bool(queries) and (
                    prefix is None or any(q.startswith(prefix) for q in queries)
                )
            if ready:
                break
            _check_alive(workers, "while starting")
            if time.monotonic() > deadline:
                raise BenchError(
                    f"worker not ready within {READY_TIMEOUT:.0f} s", _describe(workers)
                )
            time.sleep(0.05)
        time.sleep(self.sizes.ready_settle)

    def drain(
        self,
        system: System,
        conn: Conn,
        n: int,
        workers: list[Worker],
        *,
        timed: bool = True,
        remaining: Callable[[Conn, int], int] | None = None,
        watch: Callable[[], None] | None = None,
    ) -> Drained:
        """Poll until the ``n`` jobs are done; see the module docstring for the clock.

        ``timed=False``: only wait for them (a drain that is counted, not timed, may
        finish between two polls). ``remaining``: count the jobs left this way instead
        of ``system.remaining`` (a chord's members, not its callback). ``watch``: called
        after each poll (the workload measures sample the workers' memory there)."""
        count = remaining or system.remaining
        start: float | None = None
        counted = polls = 0
        last_left, last_change = n, time.monotonic()
        next_poll = time.monotonic()
        while True:
            left = count(conn, n)
            now = time.monotonic()
            polls += 1
            if watch is not None:
                watch()
            if left != last_left:
                last_left, last_change = left, now
            if start is None and left < n:
                if left <= 0:
                    # The quick form checks that the measure runs, not its rate.
                    if not timed or self.config.quick:
                        return Drained(n=n, counted=n, seconds=0.0, polls=polls)
                    return Drained.from_settlements(system.settlements(conn), n, polls)
                start, counted = now, left
            elif start is not None and left <= 0:
                return Drained(n=n, counted=counted, seconds=now - start, polls=polls)
            _check_alive(workers, f"with {left} of {n} jobs left")
            if now - last_change > STALL:
                raise BenchError(
                    f"no progress for {STALL:.0f} s with {left} of {n} jobs left",
                    _describe(workers),
                )
            next_poll += self.sizes.poll
            delay = next_poll - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_poll = time.monotonic()

    def timed_drain(
        self,
        system: System,
        db: str,
        n: int,
        workers: int,
        before: Callable[[Conn], None] | None = None,
        argv: list[str] | None = None,
    ) -> Drained:
        """Preload ``n`` jobs (untimed), optionally ``before(conn)``, then drain them
        (with ``argv`` instead of the system's worker command, if given)."""
        with self.server.connect(db) as conn:
            self.preload(system, db, conn, n)
            if before is not None:
                before(conn)
            # Flush what the preload (and the measures before) left dirty, so that no
            # checkpoint of theirs lands in this drain and slows its commits.
            conn.execute("CHECKPOINT")
            with self.workers(system, db, workers, argv=argv) as procs:
                drained = self.drain(system, conn, n, procs)
            return self.with_phases(drained, system, conn, procs)

    def with_phases(
        self, drained: Drained, system: System, conn: Conn, workers: list[Worker]
    ) -> Drained:
        """``drained`` with its whole run, steady rate and start-up (bench/phases.py),
        read from the settlements' timestamps, counted from the first worker's start:
        for a drain whose workers started on its preloaded backlog."""
        settled = system.settlements(conn)
        if settled is None or not workers:
            return drained
        try:
            phases = Phases(min(w.started_at for w in workers), settled)
        except ValueError as exc:
            raise BenchError(f"{system.key}: a drain's timestamps make no sense: {exc}") from exc
        return dataclasses.replace(drained, phases=phases)

    def wait_stamps(self, path: Path, labels: set[str], workers: list[Worker]) -> dict[str, float]:
        return wait_stamps([path], labels, workers)


def wait_stamps(
    paths: Sequence[Path], labels: set[str], workers: list[Worker], timeout: float = STAMP_TIMEOUT
) -> dict[str, float]:
    """Until every stamp job of ``labels`` has started, its stamp in one of ``paths``
    (one file a worker's checkout, for ``pickup_pair``): label -> its first start.
    BenchError if a worker dies first or ``timeout`` passes, naming a few."""
    deadline = time.monotonic() + timeout
    while True:
        stamps: dict[str, float] = {}
        for path in paths:
            for label, at in read_stamps(path).items():
                stamps.setdefault(label, at)
        missing = labels - set(stamps)
        if not missing:
            return stamps
        _check_alive(workers, f"with {len(missing)} stamp jobs not started")
        if time.monotonic() > deadline:
            raise BenchError(
                f"{len(missing)} of {len(labels)} stamp jobs never started,"
                f" e.g. {sorted(missing)[:3]}",
                _describe(workers),
            )
        time.sleep(0.05)


def _describe(workers: list[Worker]) -> str:
    return "\n\n".join(worker.describe() for worker in workers)


def _check_alive(workers: list[Worker], when: str) -> None:
    for worker in workers:
        if not worker.alive():
            raise BenchError(f"a worker exited {when}", worker.describe())
