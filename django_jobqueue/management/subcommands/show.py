"""``jobqueue show ID``: one job's fields, why it is not running (one line), a warning
when no live worker would run it, and its journal; everything a task wrote (a step's
name, a kind, an error) redacted and with its control characters escaped, never raw to
the operator's terminal."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.errors import JobNotFound
from django_jobqueue.formatting import fmt_seconds, plural, visible
from django_jobqueue.management.arguments import parse_job_id
from django_jobqueue.management.report import fmt_time, job_fields, json_default, table
from django_jobqueue.models import Status
from django_jobqueue.redaction import redact, redact_text
from django_jobqueue.states import UNFINISHED
from django_jobqueue.task.explain import explain

NAME = "show"
HELP = "One job's fields and its journal."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument("job_id", type=parse_job_id, metavar="ID")


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    write = command.stdout.write
    try:
        job = store.get_job(job_id=options["job_id"])
        entries = store.journal(job_id=job.id)
        steps = store.step_records(job_id=job.id)
    except JobNotFound as exc:
        raise CommandError(str(exc)) from exc
    for label, value in job_fields(job, steps):
        # A step's name, a kind, a payload: what a task wrote, never raw to a terminal.
        write(visible(f"{label + ':':<17} {value}", newlines=False))
    if job.status in UNFINISHED:  # why it is not running (or that it runs): one line
        write(visible(f"{'why:':<17} {explain(job)}", newlines=False))
    if job.status == Status.PENDING and not store.served(kind=job.kind, queue=job.queue):
        write(
            visible(
                f"Warning: no live worker runs kind {job.kind!r} in queue {job.queue!r}: "
                "this job waits until one does (is the task in an installed app's tasks.py?)",
                newlines=False,
            )
        )
    write("")
    write(f"Journal ({plural(len(entries), 'entry', 'entries')}):")
    if not entries:
        return
    rows = [
        [
            e.run_no,
            e.outcome,
            fmt_time(e.started_at),
            fmt_seconds(e.duration.total_seconds()) if e.duration is not None else "-",
            # The first line to a newline: splitlines() would also cut at a CR.
            visible(redact_text(e.note).partition("\n")[0]) or "-",
            visible(json.dumps(redact(e.attachment), default=json_default))
            if e.attachment is not None
            else "-",
            visible(e.actor or "-", newlines=False),
        ]
        for e in entries
    ]
    headers = ["RUN", "OUTCOME", "STARTED", "DURATION", "NOTE", "ATTACHMENT", "ACTOR"]
    for line in table(headers, rows):
        write(line)
