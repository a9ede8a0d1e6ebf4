"""``jobqueue limit [KIND]``: the global limits per kind (where each was set, and how
many of the kind are claimed now), or a kind's run-time limits set or cleared."""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.errors import InvalidLimit
from django_jobqueue.management.actor import operator
from django_jobqueue.management.arguments import kind_name, limit_count, limit_flag, limit_rate
from django_jobqueue.management.report import table
from django_jobqueue.task import limiting
from django_jobqueue.task.registry import registry

NAME = "limit"
HELP = "Show the global limits per kind, or set or clear a kind's at run time."
SKIP_CHECKS = False

HEADERS = ["KIND", "MAX IN FLIGHT", "SET BY", "IN FLIGHT", "RATE LIMIT", "SET BY", "PER KEY"]
PER_KEY_FLAGS = (
    ("--max-in-flight-per-key", limit_count, "N", "At most N claimed at once per key"),
    ("--rate-limit-per-key", limit_rate, "RATE", "Enqueues per key beyond RATE raise"),
    ("--ordered", limit_flag, "on|off", "One at a time per key, in enqueue order"),
    ("--fair", limit_flag, "on|off", "Claims round-robin between keys"),
)


def arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "kind",
        nargs="?",
        type=kind_name,
        metavar="KIND",
        help="The kind (all limited kinds if none).",
    )
    p.add_argument(
        "--max-in-flight",
        type=limit_count,
        default=limiting.UNCHANGED,
        metavar="N",
        help="At most N jobs of KIND claimed at once, all workers together; none lifts it.",
    )
    p.add_argument(
        "--rate-limit",
        type=limit_rate,
        default=limiting.UNCHANGED,
        metavar="RATE",
        help="Enqueues of KIND beyond RATE (100/s, 30/m, 500/h) raise RateLimited; none lifts it.",
    )
    for flag, kind, metavar, what in PER_KEY_FLAGS:
        p.add_argument(
            flag,
            type=kind,
            default=limiting.UNCHANGED,
            metavar=metavar,
            help=f"{what}; none lifts it.",
        )
    p.add_argument(
        "--clear",
        action="store_true",
        help="Remove KIND's run-time limits: JOBQUEUE['LIMITS'] and the task's options apply.",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    kind = options["kind"]
    given = {n: options[n] for n in ("max_in_flight", "rate_limit", *limiting.PER_KEY)}
    given = {n: v for n, v in given.items() if v is not limiting.UNCHANGED}
    changing = bool(given)
    if kind is None:
        if changing or options["clear"]:
            raise CommandError("limit: name the KIND to set or clear limits for")
        _show(command, limiting.limits(max_age=0))
        return
    if options["clear"] and changing:
        raise CommandError("limit: give --clear alone, or --max-in-flight/--rate-limit")
    if not options["clear"] and kind not in registry:
        known = ", ".join(registry.kinds()) or "none"
        raise CommandError(f"limit: no task is registered under kind {kind!r}; known: {known}")
    try:
        if options["clear"]:
            cleared = limiting.clear_limit(kind)
            command.stdout.write(
                f"{kind}: run-time limits cleared" if cleared else f"{kind}: none were set"
            )
        elif changing:
            limiting.set_limit(kind, actor=operator(), **given)
    except InvalidLimit as exc:
        raise CommandError(f"limit: {exc}") from exc
    _show(command, [limiting.resolve(kind, max_age=0)])


def _show(command: BaseCommand, limits: Sequence[limiting.KindLimits]) -> None:
    if not limits:
        command.stdout.write("No kind is limited.")
        return
    claimed = store.in_flight(kinds=[k.kind for k in limits])
    rows = [
        [
            k.kind,
            "-" if k.max_in_flight is None else str(k.max_in_flight),
            k.max_in_flight_from or "-",
            claimed.get(k.kind, 0),
            "-" if k.rate_limit is None else str(k.rate_limit),
            k.rate_limit_from or "-",
            k.per_key_summary() or "-",
        ]
        for k in limits
    ]
    for line in table(HEADERS, rows, indent=""):
        command.stdout.write(line)
