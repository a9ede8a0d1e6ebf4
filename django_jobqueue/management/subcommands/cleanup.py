"""``jobqueue cleanup``: delete jobs (with their journals and records) that finished
more than an age ago, optionally of one status or kind; ``--dry-run`` only counts."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.management.arguments import kind_name, parse_duration
from django_jobqueue.management.report import fmt_time
from django_jobqueue.models import TERMINAL

NAME = "cleanup"
HELP = "Delete finished jobs (and journals)."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
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


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    older_than: timedelta = options["older_than"]
    cutoff = timezone.now() - older_than
    try:
        count = store.cleanup(
            finished_before=cutoff,
            kind=options["kind"],
            status=options["status"],
            dry_run=options["dry_run"],
        )
    except ValueError as exc:
        raise CommandError(f"cleanup: {exc}") from exc
    what = "".join(f"{word} " for word in (options["status"], options["kind"]) if word)
    done = "would be deleted (dry run)" if options["dry_run"] else "deleted"
    command.stdout.write(f"{count} {what}job(s) finished before {fmt_time(cutoff)} {done}")
