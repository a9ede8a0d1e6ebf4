"""``jobqueue celery-check``: what maps, what differs and what is unsupported among the
project's Celery-style tasks and Celery settings (``django_jobqueue.contrib.celery``)."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from django_jobqueue.contrib.celery.check import report
from django_jobqueue.management.report import table

NAME = "celery-check"
HELP = "Celery-style tasks and settings: what maps, what differs, what is unsupported."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    """No arguments: every Celery-style task and setting is listed."""


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    rows = report()
    if not rows:
        command.stdout.write("No Celery-style tasks or settings.")
        return
    for line in table(["SUBJECT", "VERDICT", "DETAIL"], [list(r) for r in rows], indent=""):
        command.stdout.write(line)
