"""``jobqueue rerun ID --from STEP``: re-run a job from one of its recorded durable
steps (``store.rerun_from``), journalled with the operator running the command."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.errors import JobQueueError
from django_jobqueue.management.actor import operator
from django_jobqueue.management.arguments import parse_job_id

NAME = "rerun"
HELP = "Re-run a job from a recorded durable step."
SKIP_CHECKS = False


def arguments(parser: ArgumentParser) -> None:
    parser.add_argument("job_id", type=parse_job_id, metavar="ID")
    parser.add_argument(
        "--from",
        dest="step",
        required=True,
        metavar="STEP",
        help="The recorded step to run again: it and every record after it are discarded.",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    try:
        job = store.rerun_from(job_id=options["job_id"], step=options["step"], actor=operator())
    except JobQueueError as exc:
        raise CommandError(str(exc)) from exc
    command.stdout.write(f"{job.id}: pending, re-run from step {options['step']!r}")
