"""``manage.py runworker``: run a worker until SIGTERM/SIGINT (or, with --burst, until idle)."""

from __future__ import annotations

import logging
import sys
from argparse import ArgumentParser, ArgumentTypeError
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import conf
from django_jobqueue.errors import ConfigurationError, JobQueueError
from django_jobqueue.management.arguments import (
    concurrency,
    kind_name,
    positive_int,
    positive_seconds,
    queue_name,
    seconds,
)
from django_jobqueue.task.registry import registry
from django_jobqueue.worker.loop import Worker


class LineFormatter(logging.Formatter):
    """Every line of a record gets the prefix: the worker logs a turn's settlements as
    one record of one line each, and each line stays a whole log line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if "\n" not in message or record.exc_info or record.stack_info:
            return super().format(record)
        lines = message.split("\n")
        record.msg, record.args = lines[0], None
        try:
            first = super().format(record)
            prefix = first[: len(first) - len(lines[0])]
            return "\n".join([first, *(prefix + line for line in lines[1:])])
        finally:
            record.msg = message


def _cap(text: str) -> tuple[str, int]:
    kind, sep, number = text.rpartition("=")
    if not sep or not kind:
        raise ArgumentTypeError(f"--cap takes KIND=N, got {text!r}")
    try:
        kind = kind_name(kind)
    except ArgumentTypeError as exc:
        raise ArgumentTypeError(f"--cap: KIND {exc}") from None
    try:
        return kind, positive_int(number)
    except ArgumentTypeError as exc:
        raise ArgumentTypeError(f"--cap {kind}: N {exc}") from None


class Command(BaseCommand):
    help = "Run a django_jobqueue worker."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            type=queue_name,
            default=[],
            help="Only claim from this queue (repeatable; default: all).",
        )
        parser.add_argument(
            "--kind",
            action="append",
            dest="kinds",
            type=kind_name,
            default=[],
            help="Only claim this kind (repeatable; default: all known kinds).",
        )
        parser.add_argument(
            "--concurrency",
            type=concurrency,
            default=None,
            help="Jobs in flight at once (default: JOBQUEUE CONCURRENCY).",
        )
        parser.add_argument(
            "--cap",
            type=_cap,
            action="append",
            dest="caps",
            default=[],
            metavar="KIND=N",
            help="At most N jobs of KIND in flight (repeatable).",
        )
        parser.add_argument(
            "--burst", action="store_true", help="Drain what is claimable now, then exit."
        )
        parser.add_argument(
            "--max-jobs", type=positive_int, default=None, help="Exit after this many jobs."
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            default=None,
            help="Seconds to let running jobs finish after SIGTERM.",
        )
        parser.add_argument(
            "--poll-interval",
            type=positive_seconds,
            default=None,
            help="Longest wait between looks at the queue, in seconds.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conf.get()
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        capped = [kind for kind, _ in options["caps"]]
        unknown = sorted(set(options["kinds"] + capped) - set(registry.kinds()))
        if unknown:
            known = ", ".join(registry.kinds())
            raise CommandError(f"{', '.join(unknown)}: no such task kind. Known: {known}")
        logger = logging.getLogger("django_jobqueue")
        # Only when no handler would write the lines already (the project's own LOGGING,
        # on this logger or an ancestor such as root): otherwise every line came twice.
        if options["verbosity"] >= 1 and not logger.hasHandlers():
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(LineFormatter("%(asctime)s %(levelname)s %(message)s"))
            logger.addHandler(handler)
        if options["verbosity"] >= 1 and logger.level == logging.NOTSET:
            logger.setLevel(logging.DEBUG if options["verbosity"] > 1 else logging.INFO)
        try:
            worker = Worker(
                queues=options["queues"],
                kinds=options["kinds"],
                concurrency=options["concurrency"],
                caps=dict(options["caps"]),
                burst=options["burst"],
                max_jobs=options["max_jobs"],
                shutdown_timeout=options["shutdown_timeout"],
                poll_interval=options["poll_interval"],
            )
        except JobQueueError as exc:  # a periodic schedule that does not fit its task
            raise CommandError(str(exc)) from exc
        worker.install_signal_handlers()
        worker.run()
