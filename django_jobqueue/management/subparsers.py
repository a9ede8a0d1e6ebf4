"""The options of ``manage.py jobqueue``'s larger subcommands, each parsed by the
checks in ``arguments`` so that a bad value is a usage error naming its option."""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Sequence
from datetime import timedelta

from django_jobqueue.management.arguments import (
    kind_name,
    limit_count,
    limit_flag,
    limit_rate,
    parse_age,
    parse_duration,
    parse_job_id,
    parse_moment,
    plain_text,
    positive_int,
    queue_name,
)
from django_jobqueue.models import TERMINAL, Status
from django_jobqueue.task import limiting


def list_arguments(p: ArgumentParser) -> None:
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


def bulk_arguments(
    p: ArgumentParser, *, statuses: Sequence[str], default: Sequence[str], force: bool = False
) -> None:
    """``cancel``/``requeue``: ids, or the filters that select jobs in bulk."""
    p.add_argument("job_ids", type=parse_job_id, nargs="*", metavar="ID")
    if force:
        p.add_argument(
            "--force", action="store_true", help="Also requeue completed jobs (runs them again)."
        )
    p.add_argument(
        "--kind", action="append", type=kind_name, default=[], help="Only this kind (repeatable)."
    )
    p.add_argument(
        "--status",
        action="append",
        default=[],
        choices=list(statuses),
        help=f"Only this status (repeatable; default {', '.join(default)}).",
    )
    p.add_argument("--queue", type=queue_name, help="Only this queue.")
    p.add_argument(
        "--older-than",
        type=parse_duration,
        metavar="AGE",
        help="Only jobs created more than AGE ago (7d, 12h, 30m).",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="Act on every job the filters match (without it: only count them).",
    )


def cleanup_arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "--older-than",
        type=parse_duration,
        required=True,
        metavar="AGE",
        help="Delete jobs that finished more than AGE ago (7d, 12h, 2w...).",
    )
    p.add_argument(
        "--status",
        choices=[str(s) for s in TERMINAL],
        help="Only this status (default: completed, dead and cancelled).",
    )
    p.add_argument("--kind", type=kind_name, help="Only this kind.")
    p.add_argument(
        "--dry-run", action="store_true", help="Count what would be deleted; delete nothing."
    )


def limit_arguments(p: ArgumentParser) -> None:
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
    per_key = (
        ("--max-in-flight-per-key", limit_count, "N", "At most N claimed at once per key"),
        ("--rate-limit-per-key", limit_rate, "RATE", "Enqueues per key beyond RATE raise"),
        ("--ordered", limit_flag, "on|off", "One at a time per key, in enqueue order"),
        ("--fair", limit_flag, "on|off", "Claims round-robin between keys"),
    )
    for flag, kind, metavar, what in per_key:
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


def health_arguments(p: ArgumentParser) -> None:
    p.add_argument(
        "--max-heartbeat-age",
        type=parse_age,
        default=timedelta(seconds=60),
        metavar="S",
        help="Unhealthy when no running worker beat within S seconds (or 2m...; default 60).",
    )
    p.add_argument(
        "--max-pending-age",
        type=parse_age,
        default=None,
        metavar="S",
        help="Also unhealthy when a job due to run (outside paused queues) has waited "
        "longer than S seconds (default: not checked).",
    )
