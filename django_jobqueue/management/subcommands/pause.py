"""``jobqueue pause QUEUE…``: workers stop claiming from these queues (enqueue goes on);
the journal's dashboard shows who paused them and when."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.management.actor import operator
from django_jobqueue.management.arguments import queue_name

NAME = "pause"
HELP = "Stop workers claiming from these queues (enqueue goes on)."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    p.add_argument("queues", nargs="+", type=queue_name, metavar="QUEUE")


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    for name in options["queues"]:
        try:
            changed = store.pause_queue(queue=name, actor=operator())
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        command.stdout.write(f"{name}: paused" if changed else f"{name}: already paused")
