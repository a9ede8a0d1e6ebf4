"""``jobqueue workflow ID``: one workflow, its steps with their status, join rule and
parents, as a table or as JSON; read through ``django_jobqueue.store.graphs``."""

from __future__ import annotations

import json
import uuid
from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue.management.report import fmt_time, json_default, table
from django_jobqueue.management.subcommands.workflows import summary
from django_jobqueue.store import graphs

NAME = "workflow"
HELP = "One workflow: its steps, their status and parents."
SKIP_CHECKS = False

# At most this many steps are listed (the admin's workflow page draws them all).
STEPS_SHOWN = 1000


def arguments(p: ArgumentParser) -> None:
    p.add_argument("workflow_id", type=_workflow_id, metavar="ID")
    p.add_argument("--json", action="store_true", help="Print machine-readable JSON.")


def _workflow_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not a workflow id (expected a UUID)") from None


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    write = command.stdout.write
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
        out = {**summary(wf), "steps": steps, "steps_complete": drawn.complete}
        write(json.dumps(out, default=json_default, indent=2))
        return
    fields = summary(wf)
    for label in ("id", "name", "shape", "status", "created_at", "finished_at"):
        value = fields[label]
        shown = fmt_time(value) if label.endswith("_at") else str(value)
        write(f"{label.replace('_', ' ') + ':':<13} {shown}")
    write(
        f"{'steps:':<13} {fields['steps_done']}/{wf.steps_total} done, {wf.steps_dead} dead"
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
