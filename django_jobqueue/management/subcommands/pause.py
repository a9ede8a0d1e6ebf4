"""``jobqueue pause QUEUE…``: workers stop claiming from these queues (enqueue goes on);
the dashboard shows who paused them and when. (``resume`` is its inverse, and shares
its arguments and its report.)"""

from __future__ import annotations

from argparse import ArgumentParser
from collections.abc import Callable
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


def each_queue(
    command: BaseCommand, names: list[str], done: str, act: Callable[[str], bool]
) -> None:
    """``act`` on each queue, one line each: ``done`` or already ``done``."""
    for name in names:
        try:
            changed = act(name)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        command.stdout.write(f"{name}: {done}" if changed else f"{name}: already {done}")


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    actor = operator()
    each_queue(
        command, options["queues"], "paused", lambda q: store.pause_queue(queue=q, actor=actor)
    )
