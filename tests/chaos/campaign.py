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

At the end (see ``check``): every job completed; exactly one ``completed`` journal entry
per job; each job's run entries numbered 1, 2, … up to its run count, without gap or
repeat, the last one ``completed``; every execution other than the completing one
explained by a ``stale-recovered`` or ``released`` entry of its run (or a ``retried``
one whose note is a lost connection: the task's commit reached the server but its
answer did not); no claimed row left; every stopped worker exited cleanly.
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.chaos.scripting import own_database

if TYPE_CHECKING:  # imported when used: the script sets Django up first
    from tests.concurrency.procs import WorkerProcess, WorkerProcesses

KIND = "tests.chaos"
ATOMIC_KIND = "tests.chaos_atomic"
# A run-ending journal entry: one per claim of the job.
RUN_ENDINGS = {"completed", "retried", "stale-recovered", "released", "paused", "dead"}
EXPLAINS_REPEAT = {"stale-recovered", "released"}
# A ``retried`` note that says the run lost its connection, not that the task failed.
CONNECTION_LOST = ("OperationalError", "InterfaceError", "terminat", "connection")


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

    @property
    def kind(self) -> str:
        return ATOMIC_KIND if self.atomic else KIND


@dataclass
class Tally:
    """What the campaign did, and what it saw."""

    kills: int = 0
    stops: int = 0
    cuts: int = 0
    backends_terminated: int = 0
    workers_started: int = 0
    seconds: float = 0.0
    bad_exits: list[str] = field(default_factory=list)


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
            f"faults: {t.kills} SIGKILL, {t.stops} SIGTERM, {t.cuts} connection cuts"
            f" ({t.backends_terminated} backends terminated); {t.workers_started} workers started",
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
    """Runs one plan with the given worker starter (``WorkerProcesses``)."""

    def __init__(self, plan: Plan, procs: WorkerProcesses) -> None:
        self.plan = plan
        self.procs = procs
        self.rng = random.Random(plan.seed)
        self.tally = Tally()
        self.working: list[WorkerProcess] = []  # started, not signalled
        self.stopping: list[tuple[WorkerProcess, float]] = []  # SIGTERMed, since when

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

    def start_worker(self) -> None:
        self.working.append(self.procs.start(*self.args()))
        self.tally.workers_started += 1

    def run(self) -> Report:
        self.execute()
        return build_report(self.plan, self.tally)

    def execute(self) -> None:
        """Start the workers, inject every fault while the work drains, stop them all."""
        p = self.plan
        began = time.monotonic()
        self.working = self.procs.start_ready(*self.args(), count=p.workers)
        self.tally.workers_started += p.workers
        faults = ["kill"] * p.kills + ["stop"] * p.stops + ["cut"] * p.cuts
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
        return completed_count(self.plan.kind)

    def waves(self, count: int) -> list[range]:
        """The job numbers (1-based) split into ``count`` waves of nearly equal size."""
        n = self.total
        bounds = [1 + n * i // count for i in range(count + 1)]
        return [range(a, b) for a, b in itertools.pairwise(bounds)]

    def enqueue(self, wave: range) -> int:
        from django.db import transaction

        from tests.taskapp.tasks import chaos_atomic, chaos_step

        p = self.plan
        with transaction.atomic():
            (chaos_atomic if p.atomic else chaos_step).enqueue_many(
                {"seconds": p.long_work if i % p.long_every == 0 else p.work} for i in wave
            )
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

    def fault(self, what: str) -> bool:
        """Inject one fault; False if no worker is ready for it yet."""
        if what == "cut":
            from tests.concurrency.procs import terminate_other_backends

            self.tally.backends_terminated += terminate_other_backends()
            self.tally.cuts += 1
            return True
        # A registered worker is past start-up (its signal handlers are in place) and has
        # had a moment to claim.
        if what == "kill" and self.plan.processes > 1:
            return self.kill_child()
        ready = [w for w in self.working if w.alive() and w.age() >= 1.0 and w.registered()]
        if not ready:
            return False
        victim = self.rng.choice(ready)
        self.working.remove(victim)
        if what == "kill":
            victim.send(signal.SIGKILL)
            self.tally.kills += 1
        else:
            victim.send(signal.SIGTERM)
            self.stopping.append((victim, time.monotonic()))
            self.tally.stops += 1
        self.start_worker()
        return True

    def kill_child(self) -> bool:
        """SIGKILL one registered worker process of a supervisor; its supervisor starts
        another in its place, and the lease recovery takes back its jobs."""
        from django_jobqueue.models import WorkerHeartbeat

        pids = [pid for w in self.working if w.alive() for pid in w.children()]
        live = WorkerHeartbeat.objects.filter(pid__in=pids, stopped_at__isnull=True)
        ready = sorted(set(live.values_list("pid", flat=True)))
        if not ready:
            return False
        with contextlib.suppress(ProcessLookupError):  # it died meanwhile: still a kill
            os.kill(self.rng.choice(ready), signal.SIGKILL)
        self.tally.kills += 1
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


def completed_count(kind: str = KIND) -> int:
    from django_jobqueue.models import Job

    return Job.objects.filter(kind=kind, status="completed").count()


def build_report(plan: Plan, tally: Tally) -> Report:
    """Read jobs, journal and executions (atomic: effects) back and check every guarantee."""
    from django_jobqueue.models import Job, JournalEntry
    from tests.taskapp.models import Effect, Execution

    kind = plan.kind
    jobs = {j["id"]: j for j in Job.objects.filter(kind=kind).values("id", "status", "run_count")}
    journal: dict[Any, list[tuple[int, str, str]]] = defaultdict(list)
    for job_id, run_no, outcome, note in (
        JournalEntry.objects.filter(kind=kind)
        .order_by("id")
        .values_list("job_id", "run_no", "outcome", "note")
    ):
        journal[job_id].append((run_no, outcome, note))
    executions: dict[Any, list[int]] = defaultdict(list)
    rows = (
        Effect.objects.filter(job_id__in=list(jobs))
        if plan.atomic
        else Execution.objects.filter(kind=kind)
    )
    for job_id, run_no in rows.values_list("job_id", "run_no"):
        executions[job_id].append(run_no)
    violations, explained_by = check(plan, tally, jobs, journal, executions)
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


def completing_run(entries: list[tuple[int, str, str]]) -> int | None:
    """The run number of a job's ``completed`` entry (None: none or several)."""
    runs = [run_no for run_no, outcome, _ in entries if outcome == "completed"]
    return runs[0] if len(runs) == 1 else None


def check(
    plan: Plan,
    tally: Tally,
    jobs: Mapping[Any, Mapping[str, Any]],
    journal: dict[Any, list[tuple[int, str, str]]],
    executions: dict[Any, list[int]],
) -> tuple[list[str], Counter[str]]:
    """The guarantees, as a list of what broke them, and what explained repeat runs."""
    violations = [f"worker did not stop cleanly: {e}" for e in tally.bad_exits]
    if len(jobs) != plan.jobs:
        violations.append(f"{len(jobs)} jobs in the table, {plan.jobs} enqueued")
    statuses = Counter(j["status"] for j in jobs.values())
    if statuses["claimed"]:
        violations.append(f"{statuses['claimed']} rows left claimed")
    if set(statuses) != {"completed"}:
        violations.append(f"not every job completed: {dict(statuses)}")
    explained_by: Counter[str] = Counter()
    for job_id, job in jobs.items():
        violations += check_job(job_id, job, journal[job_id], executions[job_id], explained_by)
    return violations, explained_by


def check_job(
    job_id: Any,
    job: Mapping[str, Any],
    entries: list[tuple[int, str, str]],
    runs: list[int],
    explained_by: Counter[str],
) -> list[str]:
    """One job's journal against its run count and its executions."""
    out = []
    ends = [(run_no, outcome, note) for run_no, outcome, note in entries if outcome in RUN_ENDINGS]
    numbers = [run_no for run_no, _, _ in ends]
    if numbers != list(range(1, job["run_count"] + 1)):
        out.append(f"job {job_id}: run entries numbered {numbers}, run count {job['run_count']}")
    completions = [run_no for run_no, outcome, _ in ends if outcome == "completed"]
    if len(completions) != 1:
        out.append(f"job {job_id}: {len(completions)} completed entries")
    elif ends[-1][1] != "completed":
        out.append(f"job {job_id}: an entry after completion: {ends[-1][:2]}")
    if len(runs) != len(set(runs)):
        out.append(f"job {job_id}: a run number executed twice: {sorted(runs)}")
    by_run = {run_no: (outcome, note) for run_no, outcome, note in ends}
    for run_no in sorted(set(runs)):
        outcome, note = by_run.get(run_no, ("none", ""))
        if completions and run_no == completions[0]:
            continue
        if outcome in EXPLAINS_REPEAT:
            explained_by[outcome] += 1
        elif outcome == "retried" and any(word in note for word in CONNECTION_LOST):
            explained_by["retried (connection lost)"] += 1
        else:
            out.append(f"job {job_id}: execution of run {run_no} unexplained (entry: {outcome})")
    if completions and completions[0] not in runs:
        out.append(f"job {job_id}: the completing run {completions[0]} left no execution")
    return out


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
    guarantee broken, and each planned fault (SIGKILLs, SIGTERMs, cut connections)
    really dealt, so that the rest of its checks saw them."""
    assert report.violations == [], report.text()
    assert report.tally.kills == plan.kills, report.text()
    assert report.tally.stops == plan.stops, report.text()
    assert report.tally.cuts == plan.cuts, report.text()
