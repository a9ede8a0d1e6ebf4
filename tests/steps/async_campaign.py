"""The async steps' and child workflows' chaos campaign: ``async def`` jobs
(``tests.steps.achaos``) of three ``astep``s, a child chord awaited between the first
and the second (``astep_workflow``) and a sleep before the third, drained by
``runworker`` children that are SIGKILLed, SIGTERMed and cut off from the database
while they work (the chaos campaign's faults and waves: ``tests/chaos/campaign.py``).

Each step, each chord member and the chord's callback write one ``Effect`` row naming
themselves, on the parent job, in the transaction that records the step (an ``astep``
of a plain function) or settles the member (an atomic task). At the end: every job
completed with its chord's sum, its records in order, and every side effect exactly
once; one child workflow per job, completed.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobqueue \\
        python -m tests.steps.async_campaign --jobs 500 --kills 20
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from tests.chaos.campaign import Tally
from tests.steps.campaign import StepsCampaign, StepsPlan, StepsReport, cli

KIND = "tests.steps.achaos"
KINDS = (KIND, "tests.steps.kid", "tests.steps.kids_total", "jobqueue.notify_parent")
STEPS = ("a1", "a2", "a3")
RECORDS = [("step", "a1"), ("child", "kids"), ("joined", "kids"), ("step", "a2")]
RECORDS += [("sleep", "sleep 1"), ("step", "a3")]


@dataclass
class AsyncPlan(StepsPlan):
    """``members``: each job's child chord's members."""

    members: int = 3


class AsyncCampaign(StepsCampaign):
    """The chaos campaign's faults and waves over async jobs with child workflows."""

    plan: AsyncPlan

    def args(self) -> list[str]:
        p = self.plan
        kinds = [arg for kind in KINDS for arg in ("--kind", kind)]
        return [
            *kinds,
            "--concurrency",
            str(p.concurrency),
            "--async-concurrency",
            str(p.concurrency * 4),
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

        from tests.taskapp.steps_tasks import achaos

        p = self.plan
        with transaction.atomic():
            achaos.enqueue_many(
                {
                    "seconds": p.long_work if i % p.long_every == 0 else p.work,
                    "members": p.members,
                    "nap": p.nap,
                }
                for i in wave
            )
        return len(wave)

    def run(self) -> StepsReport:  # type: ignore[override]
        self.execute()
        return build_report(self.plan, self.tally)


def build_report(plan: AsyncPlan, tally: Tally) -> StepsReport:
    """Read the jobs, their records, their children and the effect rows back; check."""
    from django_jobqueue.models import Job, JournalEntry, Workflow
    from tests.helpers import recorded
    from tests.taskapp.models import Effect

    jobs = {
        j["id"]: j
        for j in Job.objects.filter(kind=KIND).values("id", "status", "run_count", "result")
    }
    effects: dict[Any, Counter[str]] = defaultdict(Counter)
    rows = Effect.objects.filter(job_id__in=list(jobs)).values_list("job_id", "worker")
    for job_id, step in rows:
        effects[job_id][step] += 1
    outcomes = Counter(JournalEntry.objects.filter(kind=KIND).values_list("outcome", flat=True))
    violations = [f"worker did not stop cleanly: {e}" for e in tally.bad_exits]
    if len(jobs) != plan.jobs:
        violations.append(f"{len(jobs)} jobs in the table, {plan.jobs} enqueued")
    statuses = Counter(j["status"] for j in jobs.values())
    if set(statuses) != {"completed"}:
        violations.append(f"not every job completed: {dict(statuses)}")
    expected = [*STEPS, *(f"kid{i}" for i in range(plan.members)), "total"]
    wanted = sum(range(plan.members))
    per_step: Counter[int] = Counter()
    for job_id, job in jobs.items():
        counts = effects[job_id]
        per_step.update(counts[s] for s in expected)
        if any(counts[s] != 1 for s in expected) or set(counts) - set(expected):
            violations.append(f"job {job_id}: effect rows {dict(counts)}, expected one each")
        if job["status"] == "completed" and job["result"] != wanted:
            violations.append(f"job {job_id}: result {job['result']!r}, expected {wanted}")
        records = [(r.get("kind"), r.get("name")) for r in recorded(job_id)]
        if records != RECORDS:
            violations.append(f"job {job_id}: records {records}")
    flows = Counter(Workflow.objects.values_list("status", flat=True))
    if flows != Counter({"completed": plan.jobs}):
        violations.append(f"child workflows by status {dict(flows)}, {plan.jobs} completed wanted")
    return StepsReport(
        plan=plan,
        tally=tally,
        statuses=statuses,
        effects_per_step=per_step,
        runs_per_job=Counter(j["run_count"] for j in jobs.values()),
        outcomes=outcomes,
        violations=violations,
        jobs_are=f"3 async steps, a child chord of {plan.members} and a sleep",
    )


def main(argv: list[str] | None = None) -> int:
    return cli(
        argv,
        plan=AsyncPlan,
        campaign=AsyncCampaign,
        database="async_steps",
        defaults=(500, 3, 20),
        description=__doc__.split("\n\n")[0],
    )


if __name__ == "__main__":
    raise SystemExit(main())
