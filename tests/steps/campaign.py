"""The durable-steps chaos campaign: jobs of five steps with a durable sleep between the
second and the third (``tests.steps.chaos``), drained by ``runworker`` children that are
SIGKILLed, SIGTERMed and cut off from the database while they work (the chaos
campaign's faults and waves: ``tests/chaos/campaign.py``).

Each step writes one ``Effect`` row naming itself inside the transaction that records
the step (a table with no unique constraint), and works a while there, so a fault
often lands mid-step. Each job also writes to its stream, inside each step and outside
it. At the end: every job completed, with five recorded steps and one sleep; every
step's effect row exactly once; every job's stream every item once, in order, offsets
without gaps; no row left claimed; every stopped worker exited cleanly.

A script for long runs (a database of its own, the DATABASE_URL's name plus ``_steps``)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobqueue \\
        python -m tests.steps.campaign --jobs 2000 --kills 40
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from tests.chaos.campaign import Campaign, Plan, Tally
from tests.chaos.scripting import own_database

KIND = "tests.steps.chaos"
STEPS = ("c1", "c2", "c3", "c4", "c5")


@dataclass
class StepsPlan(Plan):
    """What a steps campaign does: ``work`` seconds per step, ``nap`` the sleep's."""

    jobs: int = 200
    nap: float = 0.3


@dataclass
class StepsReport:
    plan: StepsPlan
    tally: Tally
    statuses: Counter[str]
    effects_per_step: Counter[int]  # effect rows: steps
    runs_per_job: Counter[int]
    outcomes: Counter[str]
    violations: list[str]
    # What each job is (the async campaign's own): five steps and a sleep by default.
    jobs_are: str = f"{len(STEPS)} steps and a sleep"

    def text(self) -> str:
        t, p = self.tally, self.plan
        lines = [
            f"steps chaos campaign: {p.jobs} jobs of {self.jobs_are},"
            f" {p.workers} workers x {p.concurrency} slots, {t.seconds:.1f} s",
            f"faults: {t.kills} SIGKILL, {t.stops} SIGTERM, {t.cuts} connection cuts"
            f" ({t.backends_terminated} backends terminated); {t.workers_started} workers started",
            f"jobs by status: {dict(sorted(self.statuses.items()))}",
            f"runs per job (runs: jobs): {dict(sorted(self.runs_per_job.items()))}",
            f"effect rows per step (rows: steps): {dict(sorted(self.effects_per_step.items()))}",
            f"journal outcomes: {dict(sorted(self.outcomes.items()))}",
        ]
        if self.violations:
            lines.append(f"VIOLATIONS ({len(self.violations)}):")
            lines += [f"  - {v}" for v in self.violations[:50]]
        else:
            lines.append("every guarantee held")
        return "\n".join(lines)


class StepsCampaign(Campaign):
    """The chaos campaign's faults and waves over durable-step jobs."""

    plan: StepsPlan

    def args(self) -> list[str]:
        p = self.plan
        return [
            "--kind",
            KIND,
            "--concurrency",
            str(p.concurrency),
            "--shutdown-timeout",
            str(p.shutdown_timeout),
            "--poll-interval",
            "1",
        ]

    def done(self) -> int:
        from django_jobqueue.models import Job

        return Job.objects.filter(kind=KIND, status="completed").count()

    def enqueue(self, wave: range) -> int:
        from django.db import transaction

        from tests.taskapp.steps_tasks import chaos

        p = self.plan
        with transaction.atomic():
            chaos.enqueue_many(
                {"seconds": p.long_work if i % p.long_every == 0 else p.work, "nap": p.nap}
                for i in wave
            )
        return len(wave)

    def run(self) -> StepsReport:  # type: ignore[override]
        self.execute()
        return build_steps_report(self.plan, self.tally)


def build_steps_report(plan: StepsPlan, tally: Tally) -> StepsReport:
    """Read the jobs, their steps, the journal and the effect rows back; check them."""
    from django_jobqueue.models import Job, JournalEntry
    from tests.helpers import recorded
    from tests.taskapp.models import Effect

    jobs = {j["id"]: j for j in Job.objects.filter(kind=KIND).values("id", "status", "run_count")}
    effects: dict[Any, Counter[str]] = defaultdict(Counter)
    for job_id, step in Effect.objects.filter(job_id__in=list(jobs)).values_list(
        "job_id", "worker"
    ):
        effects[job_id][step] += 1
    outcomes = Counter(JournalEntry.objects.filter(kind=KIND).values_list("outcome", flat=True))
    violations = [f"worker did not stop cleanly: {e}" for e in tally.bad_exits]
    if len(jobs) != plan.jobs:
        violations.append(f"{len(jobs)} jobs in the table, {plan.jobs} enqueued")
    statuses = Counter(j["status"] for j in jobs.values())
    if set(statuses) != {"completed"}:
        violations.append(f"not every job completed: {dict(statuses)}")
    per_step: Counter[int] = Counter()
    for job_id in jobs:
        counts = effects[job_id]
        per_step.update(counts[s] for s in STEPS)
        if any(counts[s] != 1 for s in STEPS) or set(counts) - set(STEPS):
            violations.append(
                f"job {job_id}: effect rows per step {dict(counts)}, expected one each"
            )
        names = [r.get("name") for r in recorded(job_id)]
        if names != ["c1", "c2", "sleep 1", "c3", "c4", "c5"]:
            violations.append(f"job {job_id}: recorded steps {names}")
        violations += _stream_violations(job_id)
    return StepsReport(
        plan=plan,
        tally=tally,
        statuses=statuses,
        effects_per_step=per_step,
        runs_per_job=Counter(j["run_count"] for j in jobs.values()),
        outcomes=outcomes,
        violations=violations,
    )


def _stream_violations(job_id: Any) -> list[str]:
    """What is wrong with the job's stream: anything but ``CHAOS_STREAM`` in order, at
    offsets 1, 2, … (read as a reader reads it)."""
    from django_jobqueue import job
    from tests.taskapp.steps_tasks import CHAOS_STREAM

    items = list(job(job_id).stream(timeout=0))
    found = [i.value for i in items]
    if found != CHAOS_STREAM:
        return [f"job {job_id}: stream {found}, expected {CHAOS_STREAM}"]
    if [i.offset for i in items] != list(range(1, len(items) + 1)):
        return [f"job {job_id}: stream offsets {[i.offset for i in items]}"]
    return []


def cli(
    argv: list[str] | None,
    *,
    plan: type[StepsPlan],
    campaign: type[StepsCampaign],
    database: str,
    defaults: tuple[int, int, int],
    description: str,
) -> int:
    """A campaign from the command line (``--jobs``, ``--workers``, ``--kills`` with
    ``defaults``, ``--seed``, ``--timeout``) on a database of its own; exit 1 on a
    violation. Shared by this campaign and the async one."""
    jobs, workers, kills = defaults
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--jobs", type=int, default=jobs)
    parser.add_argument("--workers", type=int, default=workers)
    parser.add_argument("--kills", type=int, default=kills)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=3600.0)
    options = parser.parse_args(argv)
    half = options.kills // 2
    made = plan(
        jobs=options.jobs,
        workers=options.workers,
        kills=options.kills,
        stops=half,
        cuts=half,
        seed=options.seed,
        timeout=options.timeout,
    )
    with own_database(database) as procs:
        report = campaign(made, procs).run()
    print(report.text())
    return 1 if report.violations else 0


def main(argv: list[str] | None = None) -> int:
    return cli(
        argv,
        plan=StepsPlan,
        campaign=StepsCampaign,
        database="steps",
        defaults=(2000, 4, 40),
        description=__doc__.split("\n\n")[0],
    )


if __name__ == "__main__":
    raise SystemExit(main())
