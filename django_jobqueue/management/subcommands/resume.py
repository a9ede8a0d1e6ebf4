"""``jobqueue resume QUEUE…``: workers claim from these paused queues again."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.management.arguments import queue_name

NAME = "resume"
HELP = "Let workers claim from these paused queues again."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument("queues", nargs="+", type=queue_name, metavar="QUEUE")


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    for name in options["queues"]:
        try:
            changed = store.resume_queue(queue=name)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        command.stdout.write(f"{name}: resumed" if changed else f"{name}: already resumed")
