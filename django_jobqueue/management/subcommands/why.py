"""``jobqueue why ID``: why one job is where it is, in one line (``JobHandle.explain``),
then where it can be changed and the command that lifts it, where one does. Exits 1
with a clear message for an id that names no job."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.errors import JobNotFound
from django_jobqueue.formatting import visible
from django_jobqueue.management.arguments import parse_job_id
from django_jobqueue.task.explain import Action, Explanation, Target, Why, explain

NAME = "why"
HELP = "Why one job is not running, in one line."
SKIP_CHECKS = False

# The command (or call) that lifts a reason, as a terminal user types it.
COMMANDS = {
    Action.RESUME_QUEUE: "manage.py jobqueue resume {queue}",
    Action.RUN_NOW: "django_jobqueue.run_now({id!r}) (or the admin's Run now)",
    Action.RAISE_LIMIT: "manage.py jobqueue limit {kind} {flag}",
    Action.REQUEUE: "manage.py jobqueue requeue {id}",
}
PLACES = {
    Target.JOB: "job {ref}",
    Target.QUEUE: "queue {ref} (manage.py jobqueue stats)",
    Target.LIMITS: "the limits of kind {ref} (manage.py jobqueue limit {ref})",
    Target.WORKERS: "the workers (manage.py jobqueue stats; start one: manage.py runworker)",
    Target.WORKFLOW: "workflow {ref} (manage.py jobqueue workflow {ref})",
}


def arguments(parser: ArgumentParser) -> None:
    parser.add_argument("job_id", type=parse_job_id, metavar="ID")


def lines(explanation: Explanation, *, job_id: str, kind: str, queue: str) -> list[str]:
    """The reason, where it can be changed, and what lifts it (each one line)."""
    said = [f"{explanation.code}: {explanation.message}"]
    said.append("change at: " + PLACES[explanation.target].format(ref=explanation.ref))
    if explanation.action is not Action.NONE:
        command = COMMANDS[explanation.action].format(
            id=job_id, kind=kind, queue=queue, flag=_limit_flag(explanation)
        )
        said.append(f"to lift it: {command}")
    return [visible(line, newlines=False) for line in said]


def _limit_flag(explanation: Explanation) -> str:
    """The option of ``jobqueue limit`` that raises the limit a reason names."""
    if explanation.code is not Why.KEY_AT_LIMIT:
        return "--max-in-flight N"
    if "ordered" in explanation.message:
        return "--ordered off --max-in-flight-per-key N"
    return "--max-in-flight-per-key N"


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    try:
        job = store.get_job(job_id=options["job_id"])
    except JobNotFound as exc:
        raise CommandError(str(exc)) from exc
    for line in lines(explain(job), job_id=str(job.id), kind=job.kind, queue=job.queue):
        command.stdout.write(line)
