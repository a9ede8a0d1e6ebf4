"""``manage.py jobqueue``: look at the queue and steer jobs from a shell.

Each subcommand is a module of its own in ``django_jobqueue.management.subcommands``
(its name, help, arguments and what it does); this command lists them and dispatches.
Every read and write goes through :mod:`django_jobqueue.store`, exactly as the admin's
do.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import conf
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.management.subcommands import ALL, BY_NAME


class Command(BaseCommand):
    help = f"Inspect and steer the job queue: {', '.join(s.NAME for s in ALL)}."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)
        for subcommand in ALL:
            subcommand.arguments(sub.add_parser(subcommand.NAME, help=subcommand.HELP))

    def execute(self, *args: Any, **options: Any) -> str | None:
        chosen = BY_NAME.get(options.get("subcommand") or "")
        if chosen is not None and chosen.SKIP_CHECKS:
            options["skip_checks"] = True
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conf.get()
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        BY_NAME[options["subcommand"]].run(self, options)
