"""``jobqueue steps --divergent``: the dead jobs whose replay met another sequence of
durable steps than they recorded (``StepDivergence``), newest first, each with the
divergence's first line. Only what the database says: which steps a task has is known
only by running it, so a parked job that will diverge shows here once it has run."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from django_jobqueue import store
from django_jobqueue.management.arguments import positive_int
from django_jobqueue.management.report import fmt_time, table

FIRST_LINE = 160  # characters of the divergence shown per job


NAME = "steps"
HELP = "Jobs whose durable steps diverged from their records."
SKIP_CHECKS = False


def arguments(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--divergent",
        action="store_true",
        required=True,
        help="List the jobs that died of StepDivergence (the only listing for now).",
    )
    parser.add_argument("--limit", type=positive_int, default=100, help="Jobs shown (100).")


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    found = store.divergent(limit=options["limit"])
    if not found:
        command.stdout.write("No job died of a step divergence.")
        return
    rows = [
        (job.id, job.kind, fmt_time(job.finished_at), note.splitlines()[0][:FIRST_LINE])
        for job, note in found
    ]
    for line in table(["ID", "KIND", "DIED", "DIVERGENCE"], rows):
        command.stdout.write(line)
    command.stdout.write(
        "Re-run one from a step before its divergence: jobqueue rerun ID --from STEP"
    )
