"""``jobqueue workflows``: the workflows, newest first, each with its progress (steps
done of its total, dead ones), as a table or as JSON for scripts; read through
``django_jobqueue.store.graphs``."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue.errors import InvalidFilter
from django_jobqueue.management.arguments import positive_int
from django_jobqueue.management.report import fmt_time, json_default, table
from django_jobqueue.models import Workflow, WorkflowStatus
from django_jobqueue.store import graphs

NAME = "workflows"
HELP = "List workflows, newest first, with their progress."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "--status",
        action="append",
        default=[],
        choices=WorkflowStatus.values,
        help="Only workflows of this status (repeatable).",
    )
    p.add_argument("--limit", type=positive_int, default=50, help="Workflows shown (default 50).")
    p.add_argument("--json", action="store_true", help="Print machine-readable JSON.")


def summary(wf: Workflow) -> dict[str, Any]:
    return {
        "id": wf.id,
        "name": wf.name,
        "shape": wf.shape,
        "status": wf.status,
        "cancel_requested": wf.cancel_requested,
        "steps_total": wf.steps_total,
        "steps_done": wf.steps_total - wf.steps_open,
        "steps_dead": wf.steps_dead,
        "created_at": wf.created_at,
        "finished_at": wf.finished_at,
    }


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    write = command.stdout.write
    try:
        found = graphs.list_workflows(status=options["status"], limit=options["limit"])
    except InvalidFilter as exc:
        raise CommandError(f"workflows: {exc}") from exc
    if options["json"]:
        write(json.dumps([summary(wf) for wf in found], default=json_default, indent=2))
        return
    if not found:
        write("No workflows match.")
        return
    rows = [
        [
            str(wf.id),
            wf.name,
            wf.shape,
            wf.status + (" (cancelling)" if wf.cancel_requested and wf.steps_open else ""),
            f"{wf.steps_total - wf.steps_open}/{wf.steps_total}",
            wf.steps_dead,
            fmt_time(wf.created_at),
            fmt_time(wf.finished_at),
        ]
        for wf in found
    ]
    headers = ["ID", "NAME", "SHAPE", "STATUS", "DONE/TOTAL", "DEAD", "CREATED", "FINISHED"]
    for line in table(headers, rows, indent=""):
        write(line)
