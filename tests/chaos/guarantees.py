"""The chaos campaigns' guarantees, checked on what they read back: each queue
database's jobs (how many, where, none left claimed) and each job's journal against its
runs and executions (``check_job``, which the workflow campaign checks its steps with).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.chaos.campaign import Plan, Tally

# A run-ending journal entry: one per claim of the job.
RUN_ENDINGS = {"completed", "retried", "stale-recovered", "released", "paused", "dead"}
EXPLAINS_REPEAT = {"stale-recovered", "released"}
# A ``retried`` note that says the run lost its connection, not that the task failed.
CONNECTION_LOST = ("OperationalError", "InterfaceError", "terminat", "connection")


def read_database(
    alias: str, kind: str, journal: dict[Any, list[tuple[int, str, str]]]
) -> dict[Any, dict[str, Any]]:
    """One queue database's jobs of ``kind`` (each with its ``database``), their journal
    entries added to ``journal`` in order."""
    from django_jobqueue.models import Job, JournalEntry

    fields = ("id", "status", "run_count", "queue", "key")
    jobs = {
        j["id"]: {**j, "database": alias}
        for j in Job.objects.using(alias).filter(kind=kind).values(*fields)
    }
    for job_id, run_no, outcome, note in (
        JournalEntry.objects.using(alias)
        .filter(kind=kind)
        .order_by("id")
        .values_list("job_id", "run_no", "outcome", "note")
    ):
        journal[job_id].append((run_no, outcome, note))
    return jobs


def check_database(
    alias: str, jobs: Mapping[Any, Mapping[str, Any]], enqueued: Counter[str], kind: str
) -> list[str]:
    """One queue database's own guarantees: as many jobs as were ``enqueued`` to it (if
    counted by database), none left claimed, each where its key routes it."""
    from django_jobqueue import routing

    out = []
    if enqueued and len(jobs) != enqueued[alias]:
        out.append(f"{alias}: {len(jobs)} jobs in its table, {enqueued[alias]} enqueued to it")
    claimed = sum(j["status"] == "claimed" for j in jobs.values())
    if claimed:
        out.append(f"{alias}: {claimed} rows left claimed")
    for job_id, job in jobs.items():
        routed = routing.route(kind=kind, queue=job["queue"], key=job["key"])
        if routed != alias:
            out.append(
                f"job {job_id} (key {job['key']!r}) on {alias}, its key routes it to {routed}"
            )
    return out


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
    statuses = Counter(j["status"] for j in jobs.values())  # claimed ones: check_database
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
