"""The chaos campaign: jobs drained by ``runworker`` children that are killed, stopped and
cut off from the database while they work; then every delivery guarantee is checked.

Used by the CI test (``tests/chaos/test_chaos_campaign.py``, a short form) and as a
script for long runs against a PostgreSQL server of your choosing::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobqueue \\
        python -m tests.chaos.campaign --jobs 10000 --workers 4 --kills 100

The script creates a database of its own (the DATABASE_URL's name plus ``_chaos``),
migrates it, runs the campaign, prints the report and drops the database; it exits 1
if any guarantee was broken.

The jobs are ``tests.chaos`` (``chaos_step``): each run writes an ``Execution`` row in
its own transaction before it works, so a run that a kill cut short still left its
mark. The jobs go in in waves, one more after each fault; each fault is injected once
half of the newest wave has completed, so it always hits workers with work in flight.
The faults, in a shuffled order:

- SIGKILL of a random worker, and a new worker started at once (with ``--processes``,
  of one of a supervisor's worker processes, which the supervisor replaces);
- SIGTERM of a random worker (a graceful stop: it finishes or releases its runs), and a
  replacement started;
- ``pg_terminate_backend`` of every worker connection (loop, listener, job threads).

With ``--atomic`` (``Plan.atomic``) the jobs are ``tests.chaos_atomic`` instead: an atomic
task that writes one ``Effect`` row in its run's transaction, in a table with no unique
constraint, and then works. There the check is exactly-once effects: whatever the faults
did to the runs (more than one run per job on average), each job has exactly one row,
written by its completing run.

With ``Plan.databases`` (several queue databases, ``tests/shards/test_chaos.py``) each
job has a key of its own, routed to its database; the workers are spread over them
(``runworker --database`` for each, and workers with no flag, which supervise a worker
process per database); each fault aims at one database's workers in turn (a SIGKILL of
a no-flag worker's process serving it, which its supervisor replaces; a cut of that
database's connections only), and ``Plan.restarts`` restarts one cluster in turn.

At the end (``tests/chaos/guarantees.py``), on each queue database: as many jobs as
were enqueued to it, each where its key routes it, no claimed row left; and over them
all: every job completed; exactly one ``completed`` journal entry per job; each job's
run entries numbered 1, 2, … up to its run count, without gap or repeat, the last one
``completed``; every execution other than the completing one explained by a
``stale-recovered`` or ``released`` entry of its run (or a ``retried`` one whose note
is a lost connection: the task's commit reached the server but its answer did not);
every stopped worker exited cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.chaos.guarantees import check, check_database, completing_run, read_database
from tests.chaos.scripting import own_database

if TYPE_CHECKING:  # imported when used: the script sets Django up first
    from tests.concurrency.procs import WorkerProcess, WorkerProcesses

KIND = "tests.chaos"
ATOMIC_KIND = "tests.chaos_atomic"


@dataclass
class Plan:
    """What a campaign does."""

    jobs: int = 2000
    workers: int = 4
    kills: int = 20  # SIGKILLs
    stops: int = 10  # SIGTERMs
    cuts: int = 10  # rounds of pg_terminate_backend
    concurrency: int = 4  # each worker's slots
    work: float = 0.01  # seconds a run works
    long_every: int = 25  # every n-th job works long_work instead, so a SIGTERM releases some
    long_work: float = 1.0
    shutdown_timeout: float = 0.3
    min_gap: float = 0.2  # seconds at least between two faults
    timeout: float = 600.0  # for the whole campaign
    seed: int = 7
    atomic: bool = False  # run the atomic task: check exactly-once effects
    # Worker processes per runworker (``--processes``): above 1, each worker is a
    # supervisor, a SIGKILL hits one of its worker processes (which it replaces) and a
    # SIGTERM the supervisor (which stops all of its own).
    processes: int = 1
    # Where each worker runs its jobs (``--pool``): on ``process``, a child process per
    # slot; a SIGKILL of the worker ends its children with it.
    pool: str = "thread"
    # Several queue databases (the aliases JOBQUEUE DATABASES names, routed by key):
    # each job gets a key of its own, the workers are spread over the databases
    # (``layout``), and each fault aims at the workers of one database, in turn; a cut
    # cuts that database's connections only. Empty: the one queue database.
    databases: tuple[str, ...] = ()
    restarts: int = 0  # of one cluster in turn (``Campaign``'s ``restart``), several only

    @property
    def layout(self) -> list[str | None]:
        """Each first worker's ``--database`` (None: none, it serves every database):
        the databases in turn, and every one-more-th worker with no flag."""
        cycle = [*self.databases, None] if self.databases else [None]
        return [cycle[i % len(cycle)] for i in range(self.workers)]

    @property
    def kind(self) -> str:
        return ATOMIC_KIND if self.atomic else KIND


@dataclass
class Tally:
    """What the campaign did, and what it saw."""

    kills: int = 0
    process_kills: int = 0  # of them, of a supervisor's worker process
    stops: int = 0
    cuts: int = 0
    backends_terminated: int = 0
    workers_started: int = 0
    restarts: int = 0
    seconds: float = 0.0
    bad_exits: list[str] = field(default_factory=list)
    # Several databases: each fault's kind and target ("kill@shard_a"; of them, SIGKILLs
    # of a no-flag worker's process: "process-kill@shard_a"), and the jobs enqueued to
    # each database.
    aimed: Counter[str] = field(default_factory=Counter)
    enqueued: Counter[str] = field(default_factory=Counter)


@dataclass
class Report:
    plan: Plan
    tally: Tally
    executions_per_job: Counter[int]  # atomic: runs (claims) per job
    outcomes: Counter[str]
    explained_by: Counter[str]
    violations: list[str]
    effects_per_job: Counter[int] | None = None  # atomic: Effect rows per job

    def text(self) -> str:
        t, p = self.tally, self.plan
        total = sum(n * c for n, c in self.executions_per_job.items())
        per_job = ", ".join(f"{n}: {c}" for n, c in sorted(self.executions_per_job.items()))
        what = "runs" if p.atomic else "executions"
        if self.effects_per_job is not None:
            rows = sum(n * c for n, c in self.effects_per_job.items())
            spread = ", ".join(f"{n}: {c}" for n, c in sorted(self.effects_per_job.items()))
            extra = [f"effect rows: {rows} for {p.jobs} jobs (rows: jobs): {spread}"]
        else:
            extra = []
        lines = [
            f"chaos campaign{' (atomic task)' if p.atomic else ''}: {p.jobs} jobs,"
            f" {p.workers} workers x {p.processes} processes x {p.concurrency} slots"
            f" ({p.pool} pool),"
            f" {t.seconds:.1f} s",
            f"faults: {t.kills} SIGKILL ({t.process_kills} of a supervised worker process),"
            f" {t.stops} SIGTERM, {t.cuts} connection cuts"
            f" ({t.backends_terminated} backends terminated), {t.restarts} restarts;"
            f" {t.workers_started} workers started",
            *(
                [
                    f"jobs by database: {dict(sorted(t.enqueued.items()))};"
                    f" faults by target: {dict(sorted(t.aimed.items()))}"
                ]
                if p.databases
                else []
            ),
            f"{what}: {total} for {p.jobs} jobs ({total / max(p.jobs, 1):.4f} per job)",
            f"{what} per job (runs: jobs): {per_job}",
            f"journal outcomes: {dict(sorted(self.outcomes.items()))}",
            f"repeat executions explained by: {dict(sorted(self.explained_by.items()))}",
            *extra,
        ]
        if self.violations:
            lines.append(f"VIOLATIONS ({len(self.violations)}):")
            lines += [f"  - {v}" for v in self.violations[:50]]
        else:
            lines.append("every guarantee held")
        return "\n".join(lines)


class Campaign:
    """Runs one plan with the given worker starter (``WorkerProcesses``); ``restart``
    restarts the cluster of a queue database (its alias), for ``Plan.restarts``."""

    def __init__(
        self,
        plan: Plan,
        procs: WorkerProcesses,
        restart: Callable[[str], None] | None = None,
    ) -> None:
        if plan.restarts and (restart is None or not plan.databases):
            raise ValueError("Plan.restarts needs several databases and a restart callable")
        if plan.databases and (plan.atomic or plan.processes > 1):
            # The atomic task's Effect row is on the project's database, not in its run's
            # transaction on a queue database; a no-flag worker is the supervised one.
            raise ValueError("Plan.databases runs plain jobs on one-process workers")
        self.plan = plan
        self.procs = procs
        self.restart = restart
        self.rng = random.Random(plan.seed)
        self.tally = Tally()
        self.working: list[WorkerProcess] = []  # started, not signalled
        self.stopping: list[tuple[WorkerProcess, float]] = []  # SIGTERMed, since when
        self.flags: dict[WorkerProcess, str | None] = {}  # each worker's --database

    def args(self) -> list[str]:
        p = self.plan
        return [
            "--kind",
            p.kind,
            "--concurrency",
            str(p.concurrency),
            "--shutdown-timeout",
            str(p.shutdown_timeout),
            "--poll-interval",
            "1",
            *(["--processes", str(p.processes)] if p.processes > 1 else []),
            *(["--pool", p.pool] if p.pool != "thread" else []),
        ]

    def start_worker(self, database: str | None = None) -> WorkerProcess:
        """Start one more worker (``--database``: that one)."""
        flag = ["--database", database] if database is not None else []
        worker = self.procs.start(*self.args(), *flag)
        self.flags[worker] = database
        self.working.append(worker)
        self.tally.workers_started += 1
        return worker

    def start_fleet(self) -> None:
        """The first workers: identical, ready and listening; with several databases,
        spread over them (``Plan.layout``), each ready (registered) in turn."""
        p = self.plan
        if not p.databases:
            self.working = self.procs.start_ready(*self.args(), count=p.workers)
            self.flags = dict.fromkeys(self.working)
            self.tally.workers_started += p.workers
            return
        for worker in [self.start_worker(database) for database in p.layout]:
            worker.wait_registered()

    def run(self) -> Report:
        self.execute()
        return build_report(self.plan, self.tally)

    def execute(self) -> None:
        """Start the workers, inject every fault while the work drains, stop them all."""
        p = self.plan
        began = time.monotonic()
        self.start_fleet()
        faults = ["kill"] * p.kills + ["stop"] * p.stops + ["cut"] * p.cuts
        faults += ["restart"] * p.restarts
        self.rng.shuffle(faults)
        self.drive(faults, deadline=began + p.timeout)
        for proc in self.working:
            proc.wait_registered()  # a child still starting up would die of the signal
            proc.send(signal.SIGTERM)
            self.stopping.append((proc, time.monotonic()))
        self.working = []
        self.reap(wait=True)
        self.tally.seconds = time.monotonic() - began

    @property
    def total(self) -> int:
        """How many units (here jobs) ``done`` counts up to, and the waves split."""
        return self.plan.jobs

    def done(self) -> int:
        """How many units are done so far."""
        from django_jobqueue import routing

        return sum(completed_count(self.plan.kind, alias) for alias in routing.aliases())

    def waves(self, count: int) -> list[range]:
        """The job numbers (1-based) split into ``count`` waves of nearly equal size."""
        n = self.total
        bounds = [1 + n * i // count for i in range(count + 1)]
        return [range(a, b) for a, b in itertools.pairwise(bounds)]

    def enqueue(self, wave: range) -> int:
        from django.db import transaction

        from tests.taskapp.tasks import chaos_atomic, chaos_step

        p = self.plan
        seconds = [p.long_work if i % p.long_every == 0 else p.work for i in wave]
        if p.databases:  # a key each, routed to its database (a transaction each)
            for i, s in zip(wave, seconds, strict=True):
                handle = chaos_step.using(key=f"chaos:{i}").enqueue(seconds=s)
                self.tally.enqueued[handle.database] += 1
            return len(wave)
        with transaction.atomic():
            (chaos_atomic if p.atomic else chaos_step).enqueue_many({"seconds": s} for s in seconds)
        return len(wave)

    def drive(self, faults: list[str], *, deadline: float) -> None:
        """Enqueue the jobs in waves, one more after each fault, and inject each fault once
        half of the newest wave has completed: the other half is still in flight, so
        every fault hits workers with work, however fast they are. Returns when every
        job has completed (or at the deadline)."""
        p = self.plan
        waves = self.waves(len(faults) + 1)
        newest = self.enqueue(waves.pop(0))
        enqueued = newest
        last = 0.0
        while True:
            done = self.done()
            if done >= self.total or time.monotonic() > deadline:
                return
            self.reap(wait=False)
            due = bool(faults) and done >= enqueued - newest // 2
            if due and time.monotonic() - last >= p.min_gap and self.fault(faults[0]):
                faults.pop(0)
                last = time.monotonic()
                newest = self.enqueue(waves.pop(0))
                enqueued += newest
            time.sleep(0.05)

    def aim(self, what: str) -> str | None:
        """The queue database the next fault of kind ``what`` aims at: each in turn,
        so every kind hits the workers of every database (None: the one database)."""
        databases = self.plan.databases
        if not databases:
            return None
        dealt = sum(n for aimed, n in self.tally.aimed.items() if aimed.startswith(f"{what}@"))
        return databases[dealt % len(databases)]

    def fault(self, what: str) -> bool:
        """Inject one fault; False if no worker is ready for it yet."""
        target = self.aim(what)
        if what in ("cut", "restart"):
            self.cut(what, target)
        elif not (
            self.kill_child(target) if self.supervised(what, target) else self.signal(what, target)
        ):
            return False
        if target is not None:
            self.tally.aimed[f"{what}@{target}"] += 1
        return True

    def cut(self, what: str, target: str | None) -> None:
        """Cut every worker connection (of the target database only), or restart its
        cluster; the test's own connection to it is dropped after a restart."""
        from django.db import connections

        from tests.concurrency.procs import terminate_other_backends

        if what == "restart":
            assert self.restart is not None
            assert target is not None
            self.restart(target)
            connections[target].close()
            self.tally.restarts += 1
            return
        self.tally.backends_terminated += terminate_other_backends(target or "default")
        self.tally.cuts += 1

    def serves(self, worker: WorkerProcess, target: str | None) -> bool:
        """Whether ``worker`` serves the ``target`` database (None: the one there is)."""
        return target is None or self.flags[worker] in (None, target)

    def supervises(self, worker: WorkerProcess) -> bool:
        """Whether ``worker`` is a supervisor of worker processes: under ``--processes``,
        and with several databases when it has no ``--database`` (a process each)."""
        return self.plan.processes > 1 or (bool(self.plan.databases) and self.flags[worker] is None)

    def supervised(self, what: str, target: str | None) -> bool:
        """Whether this SIGKILL hits a supervisor's worker process (not a worker): always
        under ``--processes``; with several databases, every other round of kills over
        the databases (a ``--database`` worker of each, then a no-flag worker's process
        serving each, ...), so both kinds are hit on every database, however few kills."""
        if what != "kill" or not self.plan.databases:
            return what == "kill" and self.plan.processes > 1
        rounds = self.tally.kills // len(self.plan.databases)
        return rounds % 2 == 1 and any(self.supervises(w) for w in self.working)

    def signal(self, what: str, target: str | None) -> bool:
        """SIGKILL or SIGTERM a worker (serving ``target``, if given) and start another
        in its place, serving what it served."""
        # A registered worker is past start-up (its signal handlers are in place) and has
        # had a moment to claim.
        ready = [
            w
            for w in self.working
            if w.alive()
            and w.age() >= 1.0
            and self.serves(w, target)
            and (what == "stop" or not self.supervises(w))  # a supervisor: its process
            and w.registered()
        ]
        if not ready:
            return False
        if what == "kill":
            # Aimed at a worker holding claims, if one does: a worker may hold a whole
            # wave (its claim buffer is a set of slots at least), and a kill of one that
            # holds none shows nothing of recovery (four such kills in a row, CI).
            holding = claim_holders()
            ready = [w for w in ready if w.worker_id in holding] or ready
        victim = self.rng.choice(ready)
        self.working.remove(victim)
        if what == "kill":
            victim.send(signal.SIGKILL)
            self.tally.kills += 1
        else:
            victim.send(signal.SIGTERM)
            self.stopping.append((victim, time.monotonic()))
            self.tally.stops += 1
        self.start_worker(self.flags[victim])
        return True

    def kill_child(self, target: str | None = None) -> bool:
        """SIGKILL one registered worker process of a supervisor (serving ``target``, if
        given); its supervisor starts another in its place, and the lease recovery
        takes back its jobs."""
        from tests.concurrency.procs import registered_pids

        pids = [pid for w in self.working if w.alive() for pid in w.children()]
        ready = registered_pids(pids, None if target is None else (target,))
        if not ready:
            return False
        with contextlib.suppress(ProcessLookupError):  # it died meanwhile: still a kill
            os.kill(self.rng.choice(ready), signal.SIGKILL)
        self.tally.kills += 1
        self.tally.process_kills += 1
        if target is not None:
            self.tally.aimed[f"process-kill@{target}"] += 1
        return True

    def reap(self, *, wait: bool) -> None:
        """Collect stopped workers: each must exit 0 within its grace (plus start-up)."""
        grace = self.plan.shutdown_timeout + 30.0
        still: list[tuple[WorkerProcess, float]] = []
        for proc, since in self.stopping:
            if wait:
                # A hang is reported below.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(max(0.0, since + grace - time.monotonic()))
            rc = proc.popen.poll()
            if rc is None and time.monotonic() < since + grace:
                still.append((proc, since))
            elif rc != 0:
                self.tally.bad_exits.append(proc.describe())
                proc.popen.kill()
        self.stopping = still


def claim_holders() -> set[str]:
    """The workers (``claimed_by``) holding a claimed job now, on every queue database."""
    from django_jobqueue import routing
    from django_jobqueue.models import Job

    return {
        holder
        for alias in routing.aliases()
        for holder in Job.objects.using(alias)
        .filter(status="claimed")
        .values_list("claimed_by", flat=True)
        .distinct()
    }


def completed_count(kind: str = KIND, alias: str = "default") -> int:
    from django_jobqueue.models import Job

    return Job.objects.using(alias).filter(kind=kind, status="completed").count()


def build_report(plan: Plan, tally: Tally) -> Report:
    """Read jobs, journal and executions (atomic: effects) back and check every guarantee:
    on each queue database, then over all of them."""
    from django_jobqueue import routing
    from tests.taskapp.models import Effect, Execution

    kind = plan.kind
    jobs: dict[Any, dict[str, Any]] = {}
    journal: dict[Any, list[tuple[int, str, str]]] = defaultdict(list)
    violations: list[str] = []
    for alias in routing.aliases():
        found = read_database(alias, kind, journal)
        violations += check_database(alias, found, tally.enqueued, kind)
        violations += [
            f"job {i}: on {jobs[i]['database']} and on {alias}" for i in found if i in jobs
        ]
        jobs.update(found)
    executions: dict[Any, list[int]] = defaultdict(list)
    rows = (
        Effect.objects.filter(job_id__in=list(jobs))
        if plan.atomic
        else Execution.objects.filter(kind=kind)
    )
    for job_id, run_no in rows.values_list("job_id", "run_no"):
        executions[job_id].append(run_no)
    broken, explained_by = check(plan, tally, jobs, journal, executions)
    violations += broken
    if plan.atomic:
        violations += [
            f"job {job_id}: effect rows of runs {sorted(executions[job_id])}, expected exactly"
            f" one, of its completing run {completing}"
            for job_id in jobs
            if executions[job_id] != [completing := completing_run(journal[job_id])]
        ]
    return Report(
        plan=plan,
        tally=tally,
        executions_per_job=(
            Counter(j["run_count"] for j in jobs.values())
            if plan.atomic
            else Counter(len(executions[j]) for j in jobs)
        ),
        outcomes=Counter(o for entries in journal.values() for _, o, _ in entries),
        explained_by=explained_by,
        violations=violations,
        effects_per_job=Counter(len(executions[j]) for j in jobs) if plan.atomic else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--stops", type=int, default=None, help="default: kills / 2")
    parser.add_argument("--cuts", type=int, default=None, help="default: kills / 2")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument(
        "--processes", type=int, default=1, help="worker processes per runworker (supervised)"
    )
    parser.add_argument(
        "--pool", choices=("thread", "process"), default="thread", help="runworker --pool"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument(
        "--atomic", action="store_true", help="run the atomic task: check exactly-once effects"
    )
    options = parser.parse_args(argv)
    half = options.kills // 2
    plan = Plan(
        jobs=options.jobs,
        workers=options.workers,
        kills=options.kills,
        stops=half if options.stops is None else options.stops,
        cuts=half if options.cuts is None else options.cuts,
        concurrency=options.concurrency,
        processes=options.processes,
        pool=options.pool,
        seed=options.seed,
        timeout=options.timeout,
        atomic=options.atomic,
    )
    with own_database("chaos") as procs:
        report = Campaign(plan, procs).run()
    print(report.text())
    return 1 if report.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())


def assert_unbroken_under_every_fault(report: Any, plan: Any) -> None:
    """What every campaign checks first (the plain, atomic, workflow and steps ones): no
    guarantee broken, and each planned fault (SIGKILLs, SIGTERMs, cut connections,
    cluster restarts) really dealt, so that the rest of its checks saw them."""
    assert report.violations == [], report.text()
    assert report.tally.kills == plan.kills, report.text()
    assert report.tally.stops == plan.stops, report.text()
    assert report.tally.cuts == plan.cuts, report.text()
    assert report.tally.restarts == plan.restarts, report.text()
