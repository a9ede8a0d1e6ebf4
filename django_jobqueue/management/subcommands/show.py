"""``jobqueue show ID``: one job's fields, why it is not running (one line), a warning
when no live worker would run it, its journal, and its stream's last items (for a job
that wrote any); with ``--logs``, each kept run's own log lines, newest run first.
Everything a task wrote (a step's name, a kind, an error, a log line, a stream's item)
redacted and with its control characters escaped, never raw to the operator's
terminal."""

from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from django_jobqueue import store
from django_jobqueue.errors import JobNotFound
from django_jobqueue.formatting import fmt_bytes, fmt_seconds, plural, visible
from django_jobqueue.management.arguments import parse_job_id
from django_jobqueue.management.report import fmt_time, job_fields, json_default, table
from django_jobqueue.models import Status
from django_jobqueue.redaction import redact, redact_text
from django_jobqueue.states import UNFINISHED
from django_jobqueue.store import streams
from django_jobqueue.task.explain import explain

NAME = "show"
HELP = (
    "One job's fields, its journal and its stream's last items "
    "(--logs: its runs' own log lines too)."
)
SKIP_CHECKS = False
# The stream's last items ``show`` prints (the job page shows more; a terminal, a few),
# and the width a value is cut to (its item's whole value: ``JobHandle.stream``).
STREAM_SHOWN = 10
VALUE_WIDTH = 80


def arguments(p: ArgumentParser) -> None:
    p.add_argument("job_id", type=parse_job_id, metavar="ID")
    p.add_argument(
        "--logs",
        action="store_true",
        help="also print the log lines each kept run wrote (RUN_LOGS), newest run first",
    )


def run(command: BaseCommand, options: dict[str, Any]) -> None:
    write = command.stdout.write
    try:
        job = store.get_job(job_id=options["job_id"])
        entries = store.journal(job_id=job.id, since=job.created_at)
        steps = store.step_records(job_id=job.id)
    except JobNotFound as exc:
        raise CommandError(str(exc)) from exc
    for label, value in job_fields(job, steps):
        # A step's name, a kind, a payload: what a task wrote, never raw to a terminal.
        write(visible(f"{label + ':':<17} {value}", newlines=False))
    if job.status in UNFINISHED:  # why it is not running (or that it runs): one line
        write(visible(f"{'why:':<17} {explain(job)}", newlines=False))
    if job.status == Status.PENDING and not store.served(kind=job.kind, queue=job.queue):
        write(
            visible(
                f"Warning: no live worker runs kind {job.kind!r} in queue {job.queue!r}: "
                "this job waits until one does (is the task in an installed app's tasks.py?)",
                newlines=False,
            )
        )
    write("")
    write(f"Journal ({plural(len(entries), 'entry', 'entries')}):")
    if entries:
        _journal(command, entries)
    _stream(command, job.id)
    if options.get("logs"):
        _logs(command, store.run_logs(job_id=job.id))


def _logs(command: BaseCommand, runs: list[store.RunLines]) -> None:
    """Each run's lines under a heading: time, level, logger, message (a traceback's
    lines indented under it)."""
    write = command.stdout.write
    if not runs:
        write("")
        write("Logs: none kept (RUN_LOGS, RUN_LOGS_LOGGERS)")
    for run in runs:
        dropped = f"; {plural(run.dropped, 'line', 'lines')} dropped between" if run.dropped else ""
        write("")
        write(f"Logs of run {run.run_no} ({plural(len(run.lines), 'line', 'lines')}{dropped}):")
        for line in run.shown():
            at = fmt_time(line.at) if line.at is not None else "-"
            head = f"  {at} {line.level:<8} {line.logger}: "
            text = visible(line.message).replace("\n", "\n    ")
            write(visible(head, newlines=False) + text)


def _stream(command: BaseCommand, job_id: Any) -> None:
    """The stream's size and its last ``STREAM_SHOWN`` items, oldest first: offset, run,
    the durable step that wrote it, when, and its value as compact JSON, redacted and cut
    to ``VALUE_WIDTH``. Nothing for a job that wrote none, as on its admin page."""
    found = streams.totals(job_id=job_id)
    if not found.count:
        return
    items = streams.last(job_id=job_id, count=STREAM_SHOWN)
    write = command.stdout.write
    write("")
    last = f": the last {len(items)} shown" if found.count > len(items) else ""
    size = fmt_bytes(found.size)
    write(f"Stream ({plural(found.count, 'item', 'items')}, {size} of JSON{last}):")
    rows = []
    for item in items:
        value = visible(json.dumps(redact(item.value), default=json_default, sort_keys=True))
        if len(value) > VALUE_WIDTH:
            value = value[: VALUE_WIDTH - 1] + "…"
        step = visible(item.step or "-", newlines=False)
        rows.append([item.offset, item.run, step, fmt_time(item.written_at), value])
    for line in table(["OFFSET", "RUN", "STEP", "WRITTEN", "VALUE"], rows):
        write(line)


def _journal(command: BaseCommand, entries: list[Any]) -> None:
    write = command.stdout.write
    rows = [
        [
            e.run_no,
            e.outcome,
            fmt_time(e.started_at),
            fmt_seconds(e.duration.total_seconds()) if e.duration is not None else "-",
            # The first line to a newline: splitlines() would also cut at a CR.
            visible(redact_text(e.note).partition("\n")[0]) or "-",
            visible(json.dumps(redact(e.attachment), default=json_default))
            if e.attachment is not None
            else "-",
            visible(e.actor or "-", newlines=False),
        ]
        for e in entries
    ]
    headers = ["RUN", "OUTCOME", "STARTED", "DURATION", "NOTE", "ATTACHMENT", "ACTOR"]
    for line in table(headers, rows):
        write(line)
