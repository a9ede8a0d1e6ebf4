"""``jobqueue terminate ID…``: stop jobs now. A pending job is cancelled; a claimed
one's worker stops its run by the strongest means its pool has (its process-pool child
killed, its coroutine cancelled, its thread abandoned) and settles it cancelled,
journalled with the operator and the means."""

from __future__ import annotations

import uuid
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.management import bulk
from django_jobqueue.management.actor import operator
from django_jobqueue.management.arguments import parse_job_id
from django_jobqueue.models import Status

NAME = "terminate"
HELP = (
    "Stop jobs now: cancel pending ones; have the workers running claimed ones kill their "
    "process-pool child (or cancel the coroutine, or abandon the thread) and settle them "
    "cancelled."
)
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument("job_ids", type=parse_job_id, nargs="*", metavar="ID")


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    if not options["job_ids"]:
        raise CommandError("terminate: give the ids of the jobs to stop")
    actor = operator()

    def act(job_id: uuid.UUID) -> str:
        job = store.terminate(job_id=job_id, actor=actor)
        if job.status == Status.CLAIMED:
            return f"{job.id}: terminate requested; its worker stops the run within a second"
        return f"{job.id}: cancelled"

    bulk.each(command, options["job_ids"], act, verb=NAME)
