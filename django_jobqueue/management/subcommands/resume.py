"""``jobqueue resume QUEUE…``: workers claim from these paused queues again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from django_jobqueue import store
from django_jobqueue.management.subcommands.pause import arguments, each_queue

NAME = "resume"
HELP = "Let workers claim from these paused queues again."
SKIP_CHECKS = False

__all__ = ["HELP", "NAME", "SKIP_CHECKS", "arguments", "run"]


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    each_queue(command, options["queues"], "resumed", lambda q: store.resume_queue(queue=q))
