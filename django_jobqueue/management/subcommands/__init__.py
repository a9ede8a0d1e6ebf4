"""``manage.py jobqueue``'s subcommands, one module each: its name, its help, its
arguments and what it does. The command (``commands/jobqueue.py``) only lists them
here and dispatches; a new subcommand is a new module added to ``ALL``."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any, Protocol

from django.core.management.base import BaseCommand

from django_jobqueue.management.subcommands import (
    cancel,
    celery_check,
    cleanup,
    health,
    import_celery_beat,
    limit,
    listing,
    mark,
    partitions,
    pause,
    requeue,
    rerun,
    resume,
    schedules,
    show,
    stats,
    steps,
    terminate,
    why,
    workflow,
    workflows,
)


class Subcommand(Protocol):
    """What each subcommand's module defines (mypy holds every module in ``ALL`` to it).

    ``SKIP_CHECKS``: run without Django's system checks (a probe whose one line of
    output must not be buried under the checks' warnings)."""

    NAME: str
    HELP: str
    SKIP_CHECKS: bool

    def arguments(self, parser: ArgumentParser) -> None: ...

    def run(self, command: BaseCommand, options: dict[str, Any]) -> None: ...


# In the order ``--help`` lists them.
ALL: tuple[Subcommand, ...] = (
    stats,
    listing,
    show,
    why,
    cancel,
    terminate,
    requeue,
    cleanup,
    partitions,
    pause,
    resume,
    limit,
    schedules,
    workflows,
    workflow,
    steps,
    rerun,
    health,
    mark,
    celery_check,
    import_celery_beat,
)

BY_NAME: dict[str, Subcommand] = {s.NAME: s for s in ALL}
