"""How the ``jobqueue`` command shows things: durations and times, aligned tables, a
job's fields and the stats report."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from django_jobqueue import tracing
from django_jobqueue.formatting import fmt_age, fmt_seconds
from django_jobqueue.management.arguments import UNITS
from django_jobqueue.models import Job, Status
from django_jobqueue.progress import live
from django_jobqueue.redaction import redact, redact_payload
from django_jobqueue.task.registry import registry
from django_jobqueue.validation import Undecodable

if TYPE_CHECKING:
    from django_jobqueue.store.snapshot import Stats, WorkerInfo


def fmt_window(seconds: float) -> str:
    """A window as it would be typed: 24h, 7d, 2w, 90m."""
    total = int(seconds)
    for unit in ("w", "d", "h", "m"):
        size = UNITS[unit]
        if total >= size and total % size == 0 and not (unit in "wd" and total < 2 * size):
            return f"{total // size}{unit}"
    return fmt_age(total)


def fmt_time(value: datetime | None) -> str:
    if value is None:
        return "-"
    try:
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S%z")
    except OverflowError:  # a time near year 1 or 9999 (raw SQL) has no local form here
        return value.strftime("%Y-%m-%d %H:%M:%S%z")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    """Left-aligned columns sized to their widest cell; numbers aligned right."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]

    def line(values: Sequence[str], header: bool = False) -> str:
        parts = [
            v.rjust(w) if numeric[i] and not header else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers, header=True), *(line(row) for row in cells)]


def json_default(value: Any) -> Any:
    if isinstance(value, Undecodable):  # a stored value written around the queue
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def job_fields(job: Job, steps: Sequence[Any]) -> list[tuple[str, str]]:
    def js(value: Any) -> str:
        if isinstance(value, Undecodable):  # written around the queue: say so, not fail
            return f"(undecodable: {value.error})"
        return json.dumps(value, default=json_default, sort_keys=True)

    fields = [
        ("id", str(job.id)),
        ("kind", job.kind),
        ("queue", job.queue),
        ("status", job.status + (" (cancel requested)" if job.cancel_requested else "")),
        ("priority", f"{job.priority} ({job.get_priority_display()})"),
        ("payload", js(redact_payload(job.payload, task=registry.find(job.kind)))),
        ("created at", fmt_time(job.created_at)),
        ("visible at", fmt_time(job.visible_at)),
        ("runs", str(job.run_count)),
        ("failures", str(job.failure_count)),
        ("carry", js(redact(job.carry))),
        ("result", js(redact(job.result))),
        ("finished at", fmt_time(job.finished_at)),
    ]
    if job.status == Status.CLAIMED:
        fields += [
            ("claimed by", job.claimed_by),
            ("lease expires", fmt_time(job.claim_expires_at)),
        ]
    progress = live(job.status, job.progress_done, job.progress_total, job.progress_note)
    if progress is not None:
        fields.append(("progress", str(progress)))
    trace_id = tracing.trace_id(job.trace_context)
    if trace_id:
        fields.append(("trace id", trace_id))
    if job.dedup_key is not None:
        fields.append(("dedup key", job.dedup_key))
    if job.idempotency_key is not None:
        fields.append(("idempotency key", job.idempotency_key))
    return fields + step_fields(job, steps, js)


def step_fields(job: Job, steps: Sequence[Any], js: Any) -> list[tuple[str, str]]:
    """Where a parked job is, and its recorded durable steps (``steps``, oldest first;
    results redacted)."""
    fields: list[tuple[str, str]] = []
    parked = job.status == Status.PENDING and job.visible_at > timezone.now()
    if parked and job.parked == "sleep":
        fields.append(("parked", f"sleeping until {fmt_time(job.wake_at)}"))
    elif parked and job.parked == "event":
        until = f"until {fmt_time(job.wake_at)}" if job.wake_at else "(no timeout)"
        fields.append(
            ("parked", f"waiting for event {job.wait_name!r} key {job.wait_key!r} {until}")
        )
    for r in steps:
        if not isinstance(r, dict):
            continue
        kind = r.get("kind")
        shown = {"sleep": "until", "wait": "payload"}.get(str(kind), "result")
        took = f", {r['seconds']:.3f} s" if isinstance(r.get("seconds"), float | int) else ""
        timed_out = " (timed out)" if r.get("timed_out") else ""
        # A sleep's and a wait's names say what they are ("sleep 1", "wait 2"); a
        # step's is the task's own, so it is labelled as one.
        label = str(r.get("name")) if kind in ("sleep", "wait") else f"{kind} {r.get('name')}"
        fields.append(
            (
                label,
                f"run {r.get('run')} at {r.get('at')}{took}{timed_out}, {shown}: "
                f"{js(redact(r.get(shown)))}",
            )
        )
    return fields


def render_stats(s: Stats) -> list[str]:
    """The stats snapshot as a readable report."""
    at = s.at
    return [
        f"Queue at {fmt_time(at)}",
        "",
        *_backlog(s),
        "",
        *_dead(s),
        "",
        *_unserved(s),
        "",
        *_workers(s.workers, at),
        "",
        *_runs(s),
    ]


def _backlog(s: Stats) -> list[str]:
    out = [
        f"Pending (runnable now): {s.pending_total}   scheduled for later: {s.scheduled}"
        f"   claimed (running): {s.claimed}",
        f"Waiting for their parents (workflow steps, not backlog): {s.waiting}",
        f"Parked (durable steps, not backlog): sleeping {s.sleeping}"
        f"   waiting for events {s.waiting_for_events}",
    ]
    if s.pending:
        rows: list[list[Any]] = []
        seen: set[str] = set()
        for row in s.pending:
            first = row.kind not in seen
            seen.add(row.kind)
            oldest = s.oldest_pending_seconds.get(row.kind) if first else None
            rows.append([row.kind if first else "", row.queue, row.count, fmt_age(oldest)])
        out += table(["KIND", "QUEUE", "PENDING", "OLDEST"], rows)
    out.append(
        "Paused queues: "
        + (
            ", ".join(f"{p.queue} (since {fmt_time(p.paused_at)})" for p in s.paused_queues)
            or "none"
        )
    )
    return out


def _dead(s: Stats) -> list[str]:
    out = [f"Dead: {sum(s.dead.values())}"]
    if s.dead:
        out += table(["KIND", "DEAD"], [[k, n] for k, n in s.dead.items()])
    return out


def _unserved(s: Stats) -> list[str]:
    unserved, unclaimed = s.unserved_kinds, s.unclaimed_kinds
    return [
        "Pending kinds no live worker serves: " + (", ".join(unserved) or "none"),
        "Pending kinds no worker claimed in the last hour: " + (", ".join(unclaimed) or "none"),
    ]


def _workers(workers: Sequence[WorkerInfo], at: datetime) -> list[str]:
    alive = sum(1 for w in workers if w.alive)
    out = [f"Workers: {alive} alive, {len(workers) - alive} gone"]
    if workers:
        rows = [
            [
                w.id,
                w.state,
                ",".join(w.queues) or "all",
                w.concurrency,
                fmt_age((at - w.started_at).total_seconds()) + " ago",
                fmt_age((at - w.last_seen_at).total_seconds()) + " ago",
                w.jobs_done,
            ]
            for w in workers
        ]
        headers = ["WORKER", "STATE", "QUEUES", "SLOTS", "STARTED", "LAST SEEN", "JOBS DONE"]
        out += table(headers, rows)
    return out


def _runs(s: Stats) -> list[str]:
    out = [f"Runs in the last {fmt_window(s.window_seconds)}:"]
    if not s.runs:
        return [*out, "  none"]
    rows = [
        [
            kind,
            r.runs,
            " ".join(f"{o}={n}" for o, n in sorted(r.outcomes.items())),
            fmt_seconds(r.p50),
            fmt_seconds(r.p95),
            f"{r.failure_rate * 100:.1f}%",
        ]
        for kind, r in sorted(s.runs.items())
    ]
    return out + table(["KIND", "RUNS", "OUTCOMES", "P50", "P95", "FAILED"], rows)
