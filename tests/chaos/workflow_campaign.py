"""The workflow chaos campaign: diamonds (``a → {b, c} → d``) and chords (N members, one
callback) drained by ``runworker`` children that are killed, stopped and cut off from
the database while they work; then every join guarantee is checked.

The faults are the chaos campaign's (``campaign.py``: SIGKILL, SIGTERM,
``pg_terminate_backend`` of every worker connection, each injected once half of the
newest wave of workflows has completed). The steps:

- members and inner steps (``tests.wf_chaos``) record each execution in their own
  transaction, so a run cut short still leaves its mark and its start time;
- joins (``tests.wf_chaos_join``: each diamond's ``d``, each chord's callback) are atomic:
  one ``Effect`` row written in the run's transaction, in a table with no unique
  constraint, and a result that says which parents ``ctx.parents`` showed and the sum
  of their results.

At the end (``check_workflows``): every workflow ``completed`` and every step with it;
each job's journal as the chaos campaign checks it (one ``completed`` entry, run
entries numbered without gap, every repeat execution explained); every join exactly
one Effect row, its completing run's, and a result naming exactly its parents with the
right sum; and no step's run started before each of its parents' completing runs had
finished (the parent's ``completed`` entry's time against the child's execution rows
and journal start times).

A script for long runs, like the chaos campaign's (a database of its own, the
DATABASE_URL's name plus ``_wfchaos``)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobqueue \\
        python -m tests.chaos.workflow_campaign --workflows 1000 --kills 60
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tests.chaos.campaign import Campaign, Plan, Tally
from tests.chaos.guarantees import check_job
from tests.chaos.scripting import own_database

MEMBER_KIND = "tests.wf_chaos"
JOIN_KIND = "tests.wf_chaos_join"
KINDS = (MEMBER_KIND, JOIN_KIND)
PREFIX = "wf-chaos-"  # every campaign workflow's name starts so
DIAMOND = {"a": 1, "b": 2, "c": 3}  # step -> the value its result is


@dataclass
class WorkflowPlan(Plan):
    """What a workflow campaign does (``jobs`` aside: it counts workflows)."""

    workflows: int = 100
    chords: int = 20  # of the workflows, this many are chords (spread evenly), the rest diamonds
    chord_size: int = 20

    def is_chord(self, number: int) -> bool:
        """Whether workflow ``number`` (1-based) is a chord: ``chords`` of them, evenly."""
        return number * self.chords // self.workflows > (number - 1) * self.chords // self.workflows

    @property
    def diamonds(self) -> int:
        return self.workflows - self.chords

    @property
    def steps(self) -> int:
        return self.diamonds * 4 + (self.workflows - self.diamonds) * (self.chord_size + 1)

    @property
    def edges(self) -> int:
        return self.diamonds * 4 + (self.workflows - self.diamonds) * self.chord_size


@dataclass
class WorkflowReport:
    plan: WorkflowPlan
    tally: Tally
    statuses: Counter[str]  # workflows by status
    executions_per_step: Counter[int]  # members: executions; joins: runs (claims)
    outcomes: Counter[str]
    explained_by: Counter[str]
    effects_per_join: Counter[int]
    edges: int
    closest_ms: float | None  # the smallest gap from a parent's completion to a child start
    violations: list[str]

    def text(self) -> str:
        t, p = self.tally, self.plan
        total = sum(n * c for n, c in self.executions_per_step.items())
        spread = ", ".join(f"{n}: {c}" for n, c in sorted(self.executions_per_step.items()))
        effects = ", ".join(f"{n}: {c}" for n, c in sorted(self.effects_per_join.items()))
        closest = "none" if self.closest_ms is None else f"{self.closest_ms:.1f} ms"
        lines = [
            f"workflow chaos campaign: {p.workflows} workflows ({p.diamonds} diamonds,"
            f" {p.chords} chords of {p.chord_size}), {p.steps} steps, {p.workers} workers x"
            f" {p.concurrency} slots, {t.seconds:.1f} s",
            f"faults: {t.kills} SIGKILL, {t.stops} SIGTERM, {t.cuts} connection cuts"
            f" ({t.backends_terminated} backends terminated); {t.workers_started} workers started",
            f"workflows by status: {dict(sorted(self.statuses.items()))}",
            f"runs: {total} for {p.steps} steps ({total / max(p.steps, 1):.4f} per step);"
            f" per step (runs: steps): {spread}",
            f"journal outcomes: {dict(sorted(self.outcomes.items()))}",
            f"repeat executions explained by: {dict(sorted(self.explained_by.items()))}",
            f"join effect rows (rows: joins): {effects}",
            f"edges checked for order: {self.edges}; closest child start after its"
            f" parent's completion: {closest}",
        ]
        if self.violations:
            lines.append(f"VIOLATIONS ({len(self.violations)}):")
            lines += [f"  - {v}" for v in self.violations[:50]]
        else:
            lines.append("every guarantee held")
        return "\n".join(lines)


class WorkflowCampaign(Campaign):
    """The chaos campaign's faults and waves, over workflows instead of plain jobs."""

    plan: WorkflowPlan
    made: int = 0  # steps made so far (``seconds``)

    def args(self) -> list[str]:
        p = self.plan
        kinds = [arg for kind in KINDS for arg in ("--kind", kind)]
        return [
            *kinds,
            "--concurrency",
            str(p.concurrency),
            "--shutdown-timeout",
            str(p.shutdown_timeout),
            "--poll-interval",
            "1",
        ]

    @property
    def total(self) -> int:
        return self.plan.workflows

    def done(self) -> int:
        from django_jobqueue.models import Workflow

        return Workflow.objects.filter(name__startswith=PREFIX, status="completed").count()

    def enqueue(self, wave: range) -> int:
        from django.db import transaction

        with transaction.atomic():
            for number in wave:
                (self.chord if self.plan.is_chord(number) else self.diamond)(number)
        return len(wave)

    def seconds(self) -> float:
        """How long the next step made works: every ``long_every``-th one long, so that
        a SIGTERM releases some runs."""
        p = self.plan
        self.made += 1
        return p.long_work if self.made % p.long_every == 0 else p.work

    def diamond(self, number: int) -> None:
        from django_jobqueue import Workflow
        from tests.taskapp.tasks import wf_chaos_join, wf_chaos_member

        wf = Workflow(f"{PREFIX}diamond-{number}")
        a = wf.add(wf_chaos_member.s(seconds=self.seconds(), value=DIAMOND["a"]), name="a")
        steps = [
            wf.add(
                wf_chaos_member.s(seconds=self.seconds(), value=DIAMOND[n]),
                name=n,
                after=[a],
            )
            for n in ("b", "c")
        ]
        wf.add(wf_chaos_join.s(seconds=self.seconds()), name="d", after=steps)
        wf.enqueue()

    def chord(self, number: int) -> None:
        from django_jobqueue import chord
        from tests.taskapp.tasks import wf_chaos_join, wf_chaos_member

        members = [
            wf_chaos_member.s(seconds=self.seconds(), value=i) for i in range(self.plan.chord_size)
        ]
        callback = wf_chaos_join.s(seconds=self.seconds())
        chord(members, callback, name=f"{PREFIX}chord-{number}").enqueue()

    def run(self) -> WorkflowReport:  # type: ignore[override]
        self.execute()
        return build_workflow_report(self.plan, self.tally)


def build_workflow_report(plan: WorkflowPlan, tally: Tally) -> WorkflowReport:
    """Read workflows, steps, edges, journal, executions and effects back; check them."""
    from django_jobqueue.models import Job, JournalEntry, StepEdge, Workflow
    from tests.taskapp.models import Effect, Execution

    flows = Workflow.objects.filter(name__startswith=PREFIX)
    statuses = Counter(flows.values_list("status", flat=True))
    steps = {
        j["id"]: j
        for j in Job.objects.filter(workflow__in=flows).values(
            "id", "kind", "status", "run_count", "step_name", "result", "workflow_id"
        )
    }
    journal: dict[Any, list[tuple[int, str, str]]] = defaultdict(list)
    starts: dict[Any, list[datetime]] = defaultdict(list)
    completed_at: dict[Any, datetime] = {}
    for job_id, run_no, outcome, note, started, recorded in (
        JournalEntry.objects.filter(job_id__in=list(steps))
        .order_by("id")
        .values_list("job_id", "run_no", "outcome", "note", "started_at", "recorded_at")
    ):
        journal[job_id].append((run_no, outcome, note))
        if started is not None:
            starts[job_id].append(started)
        if outcome == "completed":
            completed_at[job_id] = recorded
    executions: dict[Any, list[int]] = defaultdict(list)
    for job_id, run_no, started in Execution.objects.filter(kind=MEMBER_KIND).values_list(
        "job_id", "run_no", "started_at"
    ):
        executions[job_id].append(run_no)
        starts[job_id].append(started)
    for job_id, run_no in Effect.objects.filter(job_id__in=list(steps)).values_list(
        "job_id", "run_no"
    ):
        executions[job_id].append(run_no)
    edges = list(StepEdge.objects.filter(workflow__in=flows).values_list("parent_id", "child_id"))
    violations, explained_by = check_workflows(plan, tally, statuses, steps, journal, executions)
    order, closest = check_order(edges, completed_at, starts)
    violations += order + check_joins(steps, journal, executions, edges)
    joins = [i for i, s in steps.items() if s["kind"] == JOIN_KIND]
    return WorkflowReport(
        plan=plan,
        tally=tally,
        statuses=statuses,
        executions_per_step=Counter(
            s["run_count"] if s["kind"] == JOIN_KIND else len(executions[i])
            for i, s in steps.items()
        ),
        outcomes=Counter(o for entries in journal.values() for _, o, _ in entries),
        explained_by=explained_by,
        effects_per_join=Counter(len(executions[i]) for i in joins),
        edges=len(edges),
        closest_ms=closest,
        violations=violations,
    )


def check_workflows(
    plan: WorkflowPlan,
    tally: Tally,
    statuses: Counter[str],
    steps: dict[Any, dict[str, Any]],
    journal: dict[Any, list[tuple[int, str, str]]],
    executions: dict[Any, list[int]],
) -> tuple[list[str], Counter[str]]:
    """Nothing lost: every workflow and step completed; each step's journal and runs."""
    violations = [f"worker did not stop cleanly: {e}" for e in tally.bad_exits]
    if sum(statuses.values()) != plan.workflows:
        violations.append(f"{sum(statuses.values())} workflows, {plan.workflows} enqueued")
    if set(statuses) != {"completed"}:
        violations.append(f"not every workflow completed: {dict(statuses)}")
    if len(steps) != plan.steps:
        violations.append(f"{len(steps)} steps in the table, {plan.steps} enqueued")
    step_statuses = Counter(s["status"] for s in steps.values())
    if set(step_statuses) != {"completed"}:
        violations.append(f"not every step completed: {dict(step_statuses)}")
    explained_by: Counter[str] = Counter()
    for job_id, step in steps.items():
        violations += check_job(job_id, step, journal[job_id], executions[job_id], explained_by)
    return violations, explained_by


def check_order(
    edges: list[tuple[Any, Any]],
    completed_at: dict[Any, datetime],
    starts: dict[Any, list[datetime]],
) -> tuple[list[str], float | None]:
    """No run of a child started before its parent's completing run had finished; and
    the smallest gap seen between the two (ms)."""
    violations = []
    closest: float | None = None
    for parent, child in edges:
        done = completed_at.get(parent)
        if done is None:
            violations.append(f"step {parent}: no completed entry, yet it has a child")
            continue
        if not starts[child]:
            violations.append(f"step {child}: no recorded start")
            continue
        first = min(starts[child])
        gap = (first - done).total_seconds() * 1000
        closest = gap if closest is None else min(closest, gap)
        if first < done:
            violations.append(
                f"step {child} started at {first.isoformat()}, before its parent {parent}"
                f" completed at {done.isoformat()}"
            )
    return violations, closest


def check_joins(
    steps: dict[Any, dict[str, Any]],
    journal: dict[Any, list[tuple[int, str, str]]],
    executions: dict[Any, list[int]],
    edges: list[tuple[Any, Any]],
) -> list[str]:
    """Every join ran once: one Effect row, its completing run's; and ``ctx.parents``
    showed it exactly its parents, whose results add up."""
    parents: dict[Any, list[Any]] = defaultdict(list)
    for parent, child in edges:
        parents[child].append(parent)
    out = []
    for job_id, step in steps.items():
        if step["kind"] != JOIN_KIND:
            continue
        completing = [r for r, outcome, _ in journal[job_id] if outcome == "completed"]
        if executions[job_id] != completing or len(completing) != 1:
            out.append(
                f"join {job_id}: effect rows of runs {sorted(executions[job_id])},"
                f" completed entries of runs {completing}: expected exactly one of each"
            )
        expected = sorted(steps[p]["step_name"] for p in parents[job_id])
        want = sum(_value(steps[p]) for p in parents[job_id])
        got = step["result"] or {}
        if got.get("parents") != expected or got.get("sum") != want:
            out.append(f"join {job_id}: read {got}, expected parents {expected} summing to {want}")
    return out


def _value(step: dict[str, Any]) -> int:
    """What a member's result is (it returns the ``value`` it was given)."""
    result = step["result"]
    return int(result) if isinstance(result, int) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--chords", type=int, default=None, help="default: a fifth")
    parser.add_argument("--chord-size", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--stops", type=int, default=None, help="default: kills / 2")
    parser.add_argument("--cuts", type=int, default=None, help="default: kills / 2")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=3600.0)
    options = parser.parse_args(argv)
    if options.chords is not None and not 0 <= options.chords <= options.workflows:
        parser.error(f"--chords must be between 0 and --workflows, got {options.chords}")
    half = options.kills // 2
    plan = WorkflowPlan(
        workflows=options.workflows,
        chords=options.workflows // 5 if options.chords is None else options.chords,
        chord_size=options.chord_size,
        workers=options.workers,
        kills=options.kills,
        stops=half if options.stops is None else options.stops,
        cuts=half if options.cuts is None else options.cuts,
        concurrency=options.concurrency,
        seed=options.seed,
        timeout=options.timeout,
    )
    with own_database("wfchaos") as procs:
        report = WorkflowCampaign(plan, procs).run()
    print(report.text())
    return 1 if report.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
