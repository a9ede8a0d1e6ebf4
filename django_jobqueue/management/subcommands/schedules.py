"""``jobqueue schedules``: the periodic schedules, each with its next run, its last
tick and the job that tick enqueued."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue.errors import JobQueueError
from django_jobqueue.management.report import fmt_time, table
from django_jobqueue.task.periodic import overview

NAME = "schedules"
HELP = "Periodic schedules: their next run, last tick and its job."
SKIP_CHECKS = False

HEADERS = ["NAME", "KIND", "CRON", "TIMEZONE", "NEXT RUN", "LAST TICK", "LAST JOB"]


def arguments(p: ArgumentParser) -> None:
    """No arguments: every schedule is listed."""


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    try:
        rows = overview()
    except JobQueueError as exc:
        raise CommandError(str(exc)) from exc
    if not rows:
        command.stdout.write("No periodic schedules.")
        return
    body = [
        [
            r.name,
            r.kind,
            r.cron + (" (catch up)" if r.catch_up else ""),
            r.timezone,
            fmt_time(r.next_run),
            fmt_time(r.last_tick),
            f"{r.last_job_id} ({r.last_job_status})" if r.last_job_id else "-",
        ]
        for r in rows
    ]
    for line in table(HEADERS, body, indent=""):
        command.stdout.write(line)
