"""What the job page and the jobs list say of a job's state, in the words an operator
asks it in: is it running and for how long, when will it run, why did it last fail.

Only what the row and its journal hold is said: a claim's moment is not stored, but
its lease is (claimed or renewed a lease's length before it ends), so a running job is
said to have run *at least* that long.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from django_jobqueue import conf, store
from django_jobqueue.admin import tracebacks
from django_jobqueue.admin.common import age, badge, json_block, local
from django_jobqueue.admin.journal import FAILURES
from django_jobqueue.models import Job, JournalEntry, Status
from django_jobqueue.rules.lifecycle import LATEST
from django_jobqueue.store import streams
from django_jobqueue.task.registry import registry


def scheduled(job: Job, now: datetime) -> bool:
    """A pending job that becomes runnable later (a delay, a backoff, a pause)."""
    return job.status == Status.PENDING and job.visible_at > now


def no_time_set(job: Any) -> str | None:
    """For a pending job whose time is the latest a row can hold (a wait for an event
    with no timeout), what it waits for instead of that date; else None."""
    if job.visible_at < LATEST:
        return None
    return "the event (no timeout)" if job.parked == "event" else "no time set"


# What a pending job not yet runnable is waiting for, by its ``parked`` column: a
# durable sleep or an event; any other (a delay, a backoff, a Pause) is "scheduled".
PARKED_WORDS = {"sleep": "sleeping", "event": "waiting for event"}


def state_word(job: Any, now: datetime) -> str:
    """The word of a job's badge: its status, or for a pending job not yet runnable
    "sleeping" (``ctx.sleep``), "waiting for event" (``ctx.wait_for``) or "scheduled".
    ``job`` is a Job, or anything with its ``status`` (and ``visible_at``, ``parked``
    where known)."""
    visible_at = getattr(job, "visible_at", None)
    if job.status == Status.PENDING and visible_at is not None and visible_at > now:
        return PARKED_WORDS.get(getattr(job, "parked", "") or "", "scheduled")
    return str(job.status)


def status_of(job: Any, now: datetime) -> SafeString:
    """The job's badge, wherever a job or a step is shown (the jobs list, the job page,
    a step's parents and children): ``state_word``, and "cancelled" beside a running
    job asked to stop."""
    if job.status == Status.CLAIMED and getattr(job, "cancel_requested", False):
        return format_html("{} {}", badge(job.status), badge("cancelled"))
    return badge(state_word(job, now))


def lease_of(job: Job) -> timedelta:
    defn = registry.find(job.kind)
    return defn.lease if defn is not None and defn.lease is not None else conf.get().lease


def running_since(job: Job) -> datetime | None:
    """The latest moment a claimed job can have been claimed (its lease's start, which a
    renewal moves later): it has run at least since then."""
    if job.status != Status.CLAIMED or job.claim_expires_at is None:
        return None
    return job.claim_expires_at - lease_of(job)


def state_rows(job: Job, now: datetime) -> list[tuple[str, str, str]]:
    """(id, label, text) for the page's lines about when the job runs: runnable since or
    scheduled in, running for at least, nothing for a finished job."""
    if job.status == Status.CLAIMED:
        since = running_since(job)
        return [
            (
                "running",
                "running",
                f"run {job.run_count} on {job.claimed_by}, for at least "
                f"{age(since, now=now).removesuffix(' ago')} (claimed at or before "
                f"{local(since)}); lease until {local(job.claim_expires_at)}",
            )
        ]
    if scheduled(job, now):
        unbounded = no_time_set(job)
        return [
            (
                "scheduled",
                "scheduled for",
                unbounded or f"{local(job.visible_at)} ({age(job.visible_at, now=now)})",
            )
        ]
    if job.status == Status.PENDING:
        return [
            (
                "runnable",
                "runnable since",
                f"{local(job.visible_at)} ({age(job.visible_at, now=now)})",
            )
        ]
    return []


def empty_journal(job: Job) -> str:
    """What the journal says before its first entry."""
    if job.status == Status.CLAIMED:
        return f"No entries yet: run {job.run_count} is running now."
    if job.status == Status.WAITING:
        return "No entries yet: the step waits for its parents."
    return "No entries yet: the job has not run."


def run_logs(job: Job) -> list[dict[str, Any]]:
    """Each kept run's own log lines, newest run first: its number, how many lines were
    dropped between its head and tail, and its lines (time, level, logger, message),
    redacted as a note is."""
    return [
        {
            "run_no": run.run_no,
            "dropped": run.dropped,
            "lines": [
                {
                    "at": local(line.at) if line.at is not None else "-",
                    "level": line.level,
                    "logger": breakable(line.logger),
                    "message": line.message,
                    "warn": line.level in ("WARNING", "ERROR", "CRITICAL"),
                }
                for line in run.shown()
            ],
        }
        for run in store.run_logs(job_id=job.id)
    ]


def breakable(name: str) -> SafeString:
    """A dotted name that may wrap after its dots, never inside a part (escaped)."""
    return format_html_join(mark_safe(".<wbr>"), "{}", ((part,) for part in name.split(".")))


def last_error(entries: Sequence[JournalEntry]) -> dict[str, Any] | None:
    """The newest failure among ``entries`` (oldest first): its summary, its
    traceback's parts and where it came from; None if none failed."""
    for entry in reversed(entries):
        if entry.outcome in FAILURES:
            # A note of one line (a Permanent reason) is its own summary: no block.
            more = len(entry.note.strip().splitlines()) > 1
            parts = tracebacks.parts(entry.note) if more else []
            return {
                "entry": entry,
                "summary": tracebacks.first_line(entry.note) or entry.outcome,
                "parts": parts,
                "folded": any(p.folded for p in parts),
                "outcome": badge(entry.outcome),
                "recorded": local(entry.recorded_at),
            }
    return None


STREAM_SHOWN = 20  # the stream's last items the job page shows


def stream_section(job: Job) -> dict[str, Any] | None:
    """The job page's stream: its last ``STREAM_SHOWN`` items (offset, run, the durable
    step it was written in, when, its value as a folded JSON block) and how many it
    holds; None for a job that wrote none."""
    found = streams.totals(job_id=job.id)
    if not found.count:
        return None
    rows = [
        {
            "offset": item.offset,
            "run": item.run,
            "step": item.step or "-",
            "at": local(item.written_at),
            "block": json_block(item.value),
        }
        for item in streams.last(job_id=job.id, count=STREAM_SHOWN)
    ]
    return {"rows": rows, "count": found.count, "size": found.size, "more": found.count > len(rows)}
