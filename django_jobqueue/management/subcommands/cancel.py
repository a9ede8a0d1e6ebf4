"""``jobqueue cancel``: pending jobs cancelled; claimed ones asked to stop (their worker
settles them when it sees the request). By id, or by filter (``management.bulk``)."""

from __future__ import annotations

import uuid
from argparse import ArgumentParser
from functools import partial
from typing import Any

from django.core.management.base import BaseCommand

from django_jobqueue import store
from django_jobqueue.management import bulk
from django_jobqueue.management.actor import operator
from django_jobqueue.models import Status

NAME = "cancel"
HELP = (
    "Cancel pending jobs; ask workers to stop claimed ones. By id, or every job the "
    "filters match (a count first; --yes to act)."
)
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    bulk.arguments(p, verb=NAME)


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    actor = operator()
    if bulk.run(NAME, options, partial(store.cancel, actor=actor), command):
        return

    def act(job_id: uuid.UUID) -> str:
        job = store.cancel(job_id=job_id, actor=actor)
        if job.status == Status.CLAIMED:
            return f"{job.id}: cancel requested; it stops when its running worker sees it"
        return f"{job.id}: cancelled"

    bulk.each(command, options["job_ids"], act, verb=NAME)
