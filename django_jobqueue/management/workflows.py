"""``jobqueue workflows`` (the list) and ``jobqueue workflow ID`` (one workflow and its
steps): read through ``django_jobqueue.store.graphs``, printed as the other subcommands
print, or as JSON for scripts."""

from __future__ import annotations

import json
import uuid
from argparse import ArgumentParser, ArgumentTypeError
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from django_jobqueue.errors import InvalidFilter
from django_jobqueue.management.arguments import positive_int
from django_jobqueue.management.report import fmt_time, json_default, table
from django_jobqueue.models import Workflow, WorkflowStatus
from django_jobqueue.store import graphs

# ``workflow ID`` lists at most this many steps (the admin's workflow page draws them all).
STEPS_SHOWN = 1000

Write = Callable[[str], None]


def list_arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "--status",
        action="append",
        default=[],
        choices=WorkflowStatus.values,
        help="Only workflows of this status (repeatable).",
    )
    p.add_argument("--limit", type=positive_int, default=50, help="Workflows shown (default 50).")
    p.add_argument("--json", action="store_true", help="Print machine-readable JSON.")


def show_arguments(p: ArgumentParser) -> None:
    p.add_argument("workflow_id", type=_workflow_id, metavar="ID")
    p.add_argument("--json", action="store_true", help="Print machine-readable JSON.")


def _workflow_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not a workflow id (expected a UUID)") from None


def _summary(wf: Workflow) -> dict[str, Any]:
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


def do_list(options: dict[str, Any], write: Write) -> None:
    try:
        found = graphs.list_workflows(status=options["status"], limit=options["limit"])
    except InvalidFilter as exc:
        raise CommandError(f"workflows: {exc}") from exc
    if options["json"]:
        write(json.dumps([_summary(wf) for wf in found], default=json_default, indent=2))
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


def do_show(options: dict[str, Any], write: Write) -> None:
    wf = graphs.get_workflow(workflow_id=options["workflow_id"])
    if wf is None:
        raise CommandError(f"No workflow with id {options['workflow_id']}")
    drawn = graphs.graph(workflow_id=wf.id, limit=STEPS_SHOWN)
    names = {s.id: s.name for s in drawn.steps}
    parents: dict[uuid.UUID, list[str]] = {s.id: [] for s in drawn.steps}
    for parent, child in drawn.edges:
        parents[child].append(names[parent])
    if options["json"]:
        steps = [
            {
                "id": s.id,
                "name": s.name,
                "kind": s.kind,
                "status": s.status,
                "when": s.join_when or "completed",
                "parents": sorted(parents[s.id]),
            }
            for s in drawn.steps
        ]
        out = {**_summary(wf), "steps": steps, "steps_complete": drawn.complete}
        write(json.dumps(out, default=json_default, indent=2))
        return
    summary = _summary(wf)
    for label in ("id", "name", "shape", "status", "created_at", "finished_at"):
        value = summary[label]
        shown = fmt_time(value) if label.endswith("_at") else str(value)
        write(f"{label.replace('_', ' ') + ':':<13} {shown}")
    write(
        f"{'steps:':<13} {summary['steps_done']}/{wf.steps_total} done, {wf.steps_dead} dead"
        + (", cancel requested" if wf.cancel_requested else "")
    )
    write("")
    rows = [
        [s.name, s.kind, s.status, s.join_when or "completed", ", ".join(sorted(parents[s.id]))]
        for s in drawn.steps
    ]
    rows = [[*row[:4], row[4] or "-"] for row in rows]
    for line in table(["STEP", "KIND", "STATUS", "WHEN", "PARENTS"], rows):
        write(line)
    if not drawn.complete:
        write(f"  … only the first {STEPS_SHOWN} of {wf.steps_total} steps are listed")
