"""``jobqueue list``: jobs, oldest first (or newest), a page at a time with a cursor;
as a table, as ids one a line (for scripts and ``xargs``), or as JSON."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.management.arguments import (
    kind_name,
    parse_moment,
    plain_text,
    positive_int,
    queue_name,
)
from django_jobqueue.management.report import fmt_time, json_default, table
from django_jobqueue.models import Job, Status

NAME = "list"
HELP = "List jobs, oldest first, a page at a time."
SKIP_CHECKS = False

HEADERS = ["ID", "KIND", "QUEUE", "STATUS", "PRIORITY", "RUNS", "FAILURES", "CREATED", "FINISHED"]


def arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "--kind", action="append", type=kind_name, default=[], help="Only this kind (repeatable)."
    )
    p.add_argument("--queue", type=queue_name, help="Only this queue.")
    p.add_argument(
        "--status", action="append", default=[], choices=Status.values, help="(repeatable)"
    )
    for name, what in (
        ("--created-after", "created at or after"),
        ("--created-before", "created before"),
        ("--finished-after", "finished at or after"),
        ("--finished-before", "finished before"),
    ):
        p.add_argument(
            name,
            type=parse_moment,
            metavar="WHEN",
            help=f"Only jobs {what} WHEN: an ISO datetime or a time ago (7d, 12h, 30m).",
        )
    p.add_argument("--limit", type=positive_int, default=50, help="Jobs per page (default 50).")
    p.add_argument(
        "--after", type=plain_text, metavar="CURSOR", help="Continue after this page cursor."
    )
    p.add_argument("--newest-first", action="store_true", help="Newest jobs first.")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument(
        "--ids",
        action="store_true",
        help="Print only the ids, one a line (the next page's cursor goes to stderr).",
    )
    shown.add_argument(
        "--json", action="store_true", help="Print the page as JSON: its jobs and next_cursor."
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    write = command.stdout.write
    try:
        page = store.history(
            kind=options["kind"] or None,
            queue=options["queue"],
            status=options["status"] or None,
            created_after=options["created_after"],
            created_before=options["created_before"],
            finished_after=options["finished_after"],
            finished_before=options["finished_before"],
            after=options["after"],
            limit=options["limit"],
            newest_first=options["newest_first"],
        )
    except ValueError as exc:
        name = "--after" if options["after"] and "cursor" in str(exc) else "list"
        raise CommandError(f"{name}: {exc}") from exc
    if options["json"]:
        write(page_json(page))
        return
    if options["ids"]:
        for job in page.jobs:
            write(str(job.id))
        if page.next_cursor:
            command.stderr.write(f"next: --after '{page.next_cursor}'")
        return
    if page.jobs:
        for line in table(HEADERS, [_row(job) for job in page.jobs], indent=""):
            write(line)
    else:
        write("No jobs match.")
    write(f"next: --after '{page.next_cursor}'" if page.next_cursor else "next: (end)")


def _row(job: Job) -> list[Any]:
    return [
        str(job.id),
        job.kind,
        job.queue,
        job.status,
        job.get_priority_display(),
        job.run_count,
        job.failure_count,
        fmt_time(job.created_at),
        fmt_time(job.finished_at),
    ]


def job_json(job: Job) -> dict[str, Any]:
    """A job's fields for ``list --json`` (never its payload, carry or result: a list
    is for finding jobs; ``show`` redacts and prints those)."""
    return {
        "id": job.id,
        "kind": job.kind,
        "queue": job.queue,
        "status": job.status,
        "priority": job.priority,
        "runs": job.run_count,
        "failures": job.failure_count,
        "created_at": job.created_at,
        "visible_at": job.visible_at,
        "finished_at": job.finished_at,
        "cancel_requested": job.cancel_requested,
    }


def page_json(page: store.Page) -> str:
    return json.dumps(
        {"jobs": [job_json(job) for job in page.jobs], "next_cursor": page.next_cursor},
        default=json_default,
        indent=2,
    )
