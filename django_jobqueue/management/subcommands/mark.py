"""``jobqueue mark LABEL``: a deploy marker (or any moment worth seeing) on the
dashboard's history charts, with who set it and when."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from django_jobqueue.errors import InvalidMarker
from django_jobqueue.management.actor import operator
from django_jobqueue.operations import mark

NAME = "mark"
HELP = 'Set a marker on the history charts, e.g. jobqueue mark "deploy 1.4.2".'
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument("label", metavar="LABEL", help='What happened, e.g. "deploy 1.4.2".')
    p.add_argument(
        "--by",
        default=None,
        metavar="WHO",
        help="Who set it (default: the command and the OS user running it).",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    try:
        marker = mark(options["label"], by=options["by"] or operator())
    except InvalidMarker as exc:
        raise CommandError(str(exc)) from exc
    at = timezone.localtime(marker.at)
    command.stdout.write(f"marked {marker.label!r} at {at:%Y-%m-%d %H:%M:%S %Z} by {marker.by}")
