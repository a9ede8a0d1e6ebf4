"""``jobqueue partitions``: the partitioned journal (PostgreSQL). With no option, list
its partitions; ``--convert`` swaps an installation's journal for a partitioned one
(``--revert`` back), ``--create-ahead`` makes partitions periods ahead, ``--drop-older-than``
drops those past an age, ``--analyze`` analyzes the parent now. The workers' maintenance
does the last three on its own once the journal is partitioned."""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from django_jobqueue import conf, store
from django_jobqueue.errors import PartitionError
from django_jobqueue.management.arguments import parse_duration
from django_jobqueue.management.report import fmt_time

NAME = "partitions"
HELP = "List, convert to, make ahead or drop the journal's partitions (PostgreSQL)."
SKIP_CHECKS = False


def arguments(p: ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--convert",
        action="store_true",
        help="Swap the journal for one partitioned by time (every entry copied, in one"
        " transaction: settlements wait for it).",
    )
    what.add_argument(
        "--revert", action="store_true", help="Swap a partitioned journal back for one table."
    )
    what.add_argument(
        "--create-ahead",
        type=int,
        metavar="N",
        help="Make the partitions up to N periods past the current one.",
    )
    what.add_argument(
        "--drop-older-than",
        type=parse_duration,
        metavar="AGE",
        help="Drop the partitions whose every entry is older than AGE (30d, 8w...).",
    )
    what.add_argument("--analyze", action="store_true", help="ANALYZE the partitioned parent now.")
    p.add_argument(
        "--period",
        choices=conf.JOURNAL_PERIODS,
        help="With --convert: a partition's period (default: JOURNAL_PERIOD).",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    if options["period"] and not options["convert"]:
        raise CommandError("partitions: --period goes with --convert only")
    settings = conf.get()
    try:
        if options["convert"]:
            period = options["period"] or settings.journal_period
            ahead = settings.journal_partitions_ahead
            copied = store.partition_journal(period=period, ahead=ahead)
            command.stdout.write(f"journal partitioned by {period}: {copied} entries copied")
        elif options["revert"]:
            copied = store.unpartition_journal()
            command.stdout.write(f"journal is one table again: {copied} entries copied")
        elif options["create_ahead"] is not None:
            made = store.make_ahead(ahead=options["create_ahead"])
            _said(command, made, "made", [f"{d:%Y-%m-%d}" for d in made or []])
        elif options["drop_older_than"] is not None:
            age: timedelta = options["drop_older_than"]
            dropped = store.drop_older(before=timezone.now() - age)
            _said(command, dropped, "dropped", dropped or [])
        elif options["analyze"]:
            if store.analyze_journal(every=timedelta(0)):
                command.stdout.write("journal's partitioned parent analyzed")
            else:
                command.stdout.write("another worker is analyzing the journal's parent now")
        else:
            _list(command)
    except PartitionError as exc:
        raise CommandError(f"partitions: {exc}") from exc


def _said(command: BaseCommand, done: list[Any] | None, verb: str, names: list[str]) -> None:
    if done is None:
        raise CommandError(
            f"partitions: the journal's lock was busy; {', '.join(names) or 'none'} {verb}"
            " so far, try again"
        )
    command.stdout.write(f"partitions {verb}: {', '.join(names) or 'none'}")


def _list(command: BaseCommand) -> None:
    layout = store.journal_layout()
    if layout is None:
        command.stdout.write(
            "the journal is one table (not partitioned); jobqueue partitions --convert"
            " partitions it (PostgreSQL)"
        )
        return
    analyzed = fmt_time(layout.analyzed_at) if layout.analyzed_at else "never"
    command.stdout.write(f"journal partitioned by {layout.period}; parent analyzed: {analyzed}")
    for p in layout.partitions:
        if p.default:
            span = "default (what no range holds)"
        else:
            span = f"{fmt_time(p.lower) if p.lower else 'the beginning'} to {fmt_time(p.upper)}"
        command.stdout.write(f"  {p.name}  {span}  ~{p.rows:,} rows  {p.bytes:,} bytes")
