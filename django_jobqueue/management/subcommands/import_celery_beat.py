"""``jobqueue import-celery-beat``: ``django_celery_beat``'s enabled ``PeriodicTask``
rows as a ``JOBQUEUE["PERIODIC"]`` setting to paste (our schedules live in code and
settings, reviewed like the rest of the project), and each row that does not map."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError

from django_jobqueue.contrib.celery.beat import periodic_setting, rows_of_django_celery_beat

NAME = "import-celery-beat"
HELP = "django_celery_beat's periodic tasks as a JOBQUEUE['PERIODIC'] setting."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    """No arguments: every enabled periodic task is read."""


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    if not apps.is_installed("django_celery_beat"):
        raise CommandError(
            "django_celery_beat is not installed: there are no PeriodicTask rows to import "
            "(a beat_schedule in code or settings becomes periodic schedules by itself)"
        )
    entries, refused = periodic_setting(rows_of_django_celery_beat())
    command.stdout.write('JOBQUEUE["PERIODIC"] = ' + json.dumps(entries, indent=4))
    for line in refused:
        command.stderr.write(f"not imported: {line}")
