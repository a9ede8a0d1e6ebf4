"""``jobqueue stats``: the backlog, claims, failures, workers and run statistics (or one
key's load, by kind), as a report or as JSON."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand

from django_jobqueue import store
from django_jobqueue.management.arguments import parse_duration
from django_jobqueue.management.report import json_default, render_stats, table

NAME = "stats"
HELP = "Backlog, claims, failures, workers and run statistics."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="Print machine-readable JSON.")
    p.add_argument("--key", help="Only KEY's pending and in-flight jobs, by kind.")
    p.add_argument(
        "--window",
        type=parse_duration,
        default=timedelta(hours=24),
        help="Run statistics over this much recent history (default 24h).",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    write = command.stdout.write
    if options["key"] is not None:
        rows = [
            [k.kind, k.pending, k.in_flight, k.oldest or "-"]
            for k in store.key_loads(key=options["key"])
        ]
        for line in table(["KIND", "PENDING", "IN FLIGHT", "OLDEST PENDING"], rows, indent=""):
            write(line)
        return
    snapshot = store.stats(window=options["window"])
    if options["json"]:
        write(json.dumps(snapshot.to_dict(), default=json_default, indent=2))
        return
    for line in render_stats(snapshot):
        write(line)
