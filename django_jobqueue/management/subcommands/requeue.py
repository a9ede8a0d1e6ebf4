"""``jobqueue requeue``: dead or cancelled jobs (completed ones with ``--force``) back to
pending. By id, or by filter (``management.bulk``)."""

from __future__ import annotations

import uuid
from argparse import ArgumentParser
from functools import partial
from typing import Any

from django.core.management.base import BaseCommand

from django_jobqueue import store
from django_jobqueue.management import bulk
from django_jobqueue.management.actor import operator

NAME = "requeue"
HELP = (
    "Send dead or cancelled jobs back to pending. By id, or every job the filters match "
    "(a count first; --yes to act)."
)
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    bulk.arguments(p, verb=NAME, force=True)


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    requeue = partial(store.requeue, force=options["force"], actor=operator())
    if bulk.run(NAME, options, requeue, command):
        return

    def act(job_id: uuid.UUID) -> str:
        job = requeue(job_id=job_id)
        return f"{job.id}: requeued (pending now)"

    bulk.each(command, options["job_ids"], act, verb=NAME)
