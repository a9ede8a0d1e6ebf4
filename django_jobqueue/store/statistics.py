"""A snapshot of the queue for ``jobqueue stats``, the admin and monitoring."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from django_jobqueue.errors import InvalidFilter
from django_jobqueue.models import (
    Job,
    JournalEntry,
    Outcome,
    QueuePause,
    Status,
    WorkerHeartbeat,
    Workflow,
    WorkflowStatus,
)
from django_jobqueue.store import sql
from django_jobqueue.store.durable import parked_counts
from django_jobqueue.store.history import Slot, kind_runs, read_history
from django_jobqueue.store.snapshot import (
    Gauges,
    KindRuns,
    PausedQueue,
    PendingCount,
    Stats,
    WorkerInfo,
)

WORKER_GONE_AFTER = timedelta(seconds=60)


def stats(
    *, window: timedelta = timedelta(hours=24), now: datetime | None = None, history: bool = False
) -> Stats:
    """A snapshot of the queue: backlog, waiting workflow steps, claims, failures, workers,
    paused queues and recent run statistics. Every count reads only the rows of its status
    (a partial index each); the run statistics and ``unclaimed_kinds`` read the journal
    over their window, or with ``history`` the run statistics read the run history
    (``store.history``: counts a few seconds late, percentiles from buckets), whose cost
    does not grow with the runs in the window: what a page shown often reads."""
    now = now or timezone.now()
    snapshot = gauges(now=now)
    since = now - window
    return Stats(
        **{f.name: getattr(snapshot, f.name) for f in dataclasses.fields(Gauges)},
        unclaimed_kinds=tuple(_unclaimed_kinds(set(snapshot.oldest_pending_seconds), now=now)),
        runs=(
            kind_runs(since=since, until=now, outcomes=_RUN_OUTCOMES, failed=_FAILED_OUTCOMES)
            if history
            else run_stats(since=since)
        ),
        window_seconds=window.total_seconds(),
    )


def gauges(*, now: datetime | None = None) -> Gauges:
    """What ``stats()`` says of the queue now, without a look at the journal (what the
    metrics view reads on every scrape): backlog, claims, dead and cancelled jobs,
    paused queues, unserved kinds and workers."""
    now = now or timezone.now()
    jobs = sql.jobs()
    runnable = jobs.filter(status=Status.PENDING, visible_at__lte=now)
    pending_by = tuple(
        PendingCount(kind=row["kind"], queue=row["queue"], count=row["n"])
        for row in runnable.values("kind", "queue")
        .annotate(n=Count("id"))
        .order_by("kind", "queue")
    )
    oldest = {
        row["kind"]: (now - row["oldest"]).total_seconds()
        for row in runnable.values("kind").annotate(oldest=Min("visible_at")).order_by("kind")
    }
    claimed_by = _by_kind(jobs.filter(status=Status.CLAIMED))
    workers, live = _workers(now)
    parked = parked_counts(now=now)
    return Gauges(
        at=now,
        pending=pending_by,
        pending_total=sum(row.count for row in pending_by),
        oldest_pending_seconds=oldest,
        scheduled=jobs.filter(sql.EVERY_PRIORITY, status=Status.PENDING, visible_at__gt=now).count()
        - parked["sleep"]
        - parked["event"],
        waiting=_waiting(jobs),
        sleeping=parked["sleep"],
        waiting_for_events=parked["event"],
        claimed=sum(claimed_by.values()),
        claimed_by_kind=claimed_by,
        dead=_by_kind(jobs.filter(status=Status.DEAD)),
        cancelled=jobs.filter(status=Status.CANCELLED).count(),
        paused_queues=tuple(
            PausedQueue(queue=p.queue, paused_at=p.paused_at, paused_by=p.paused_by)
            for p in QueuePause.objects.using(sql.alias()).order_by("queue")
        ),
        unserved_kinds=tuple(_unserved(pending_by, live)),
        workers=tuple(workers),
    )


def _waiting(jobs: QuerySet[Job]) -> int:
    """Steps waiting for their parents. Only a running workflow has any, so this reads the
    running workflows (their status index) and probes each one's waiting steps (the steps'
    ``(workflow, status)`` index): no scan of the jobs, however many finished steps stay."""
    running = Workflow.objects.using(sql.alias()).filter(status=WorkflowStatus.RUNNING)
    return jobs.filter(workflow__in=running.values("id"), status=Status.WAITING).count()


def _by_kind(qs: QuerySet[Job]) -> dict[str, int]:
    # COUNT(*), not COUNT(id): the history index (status, kind, …) answers it alone.
    return {
        row["kind"]: row["n"] for row in qs.values("kind").annotate(n=Count("*")).order_by("kind")
    }


def _workers(now: datetime) -> tuple[list[WorkerInfo], list[WorkerHeartbeat]]:
    """Every worker row, latest seen first; and the live ones."""
    workers = []
    live: list[WorkerHeartbeat] = []
    for w in WorkerHeartbeat.objects.using(sql.alias()).order_by("-last_seen_at"):
        alive = w.stopped_at is None and now - w.last_seen_at <= WORKER_GONE_AFTER
        if alive:
            live.append(w)
        workers.append(
            WorkerInfo(
                id=w.id,
                host=w.host,
                pid=w.pid,
                queues=w.queues,
                kinds=w.kinds,
                concurrency=w.concurrency,
                started_at=w.started_at,
                last_seen_at=w.last_seen_at,
                jobs_done=w.jobs_done,
                state="alive" if alive else "gone",
            )
        )
    return workers, live


def _unserved(pending_by: Sequence[PendingCount], live: list[WorkerHeartbeat]) -> list[str]:
    """Kinds with runnable jobs that no live worker serves: a worker serves a row when it
    runs the kind and reads the row's queue (no queues listed means every queue)."""
    return sorted(
        {row.kind for row in pending_by if not any(serves(w, row.kind, row.queue) for w in live)}
    )


def serves(worker: WorkerHeartbeat, kind: str, queue: str) -> bool:
    """Whether ``worker`` claims jobs of ``kind`` in ``queue``: it runs the kind and
    reads the queue (no queues listed means every queue)."""
    return kind in worker.kinds and (not worker.queues or queue in worker.queues)


UNCLAIMED_AFTER = timedelta(hours=1)


def _unclaimed_kinds(pending_kinds: set[str], *, now: datetime) -> list[str]:
    """Kinds with runnable jobs that no worker has claimed within ``UNCLAIMED_AFTER``:
    none is running now and no worker settled or lost a run of them since."""
    if not pending_kinds:
        return []
    kinds = sorted(pending_kinds)
    running = set(
        sql.jobs().filter(status=Status.CLAIMED, kind__in=kinds).values_list("kind", flat=True)
    )
    recent = set(
        sql.journal_entries()
        .filter(kind__in=kinds, recorded_at__gte=now - UNCLAIMED_AFTER)
        .exclude(worker="")
        .values_list("kind", flat=True)
        .distinct()
    )
    return sorted(pending_kinds - running - recent)


_FAILED_OUTCOMES = (Outcome.RETRIED, Outcome.DEAD, Outcome.STALE_RECOVERED)
_RUN_OUTCOMES = (
    *_FAILED_OUTCOMES,
    Outcome.COMPLETED,
    Outcome.PAUSED,
    Outcome.RELEASED,
    Outcome.CANCELLED,
)


def run_stats(*, since: datetime) -> dict[str, KindRuns]:
    """Per kind, over journal entries recorded since ``since``: runs by outcome, p50/p95
    duration in seconds, and failure rate (failed runs / runs)."""
    entries = sql.journal_entries().filter(recorded_at__gte=since, outcome__in=_RUN_OUTCOMES)
    # An operator's cancel of a pending job is journalled as "cancelled" but no worker ran
    # it (runs, including recovered ones, always name their worker): not a run.
    entries = entries.exclude(outcome=Outcome.CANCELLED, worker="")
    outcomes: dict[str, dict[str, int]] = {}
    for row in entries.values("kind", "outcome").annotate(n=Count("id")).order_by("kind"):
        outcomes.setdefault(row["kind"], {})[row["outcome"]] = row["n"]
    percentiles = _percentiles(entries.filter(duration__isnull=False))
    result: dict[str, KindRuns] = {}
    for kind, counts in outcomes.items():
        runs = sum(counts.values())
        failed = sum(counts.get(o, 0) for o in _FAILED_OUTCOMES)
        p50, p95 = percentiles.get(kind, (None, None))
        result[kind] = KindRuns(
            runs=runs,
            outcomes=counts,
            p50=p50,
            p95=p95,
            failure_rate=failed / runs if runs else 0.0,
        )
    return result


def _percentiles(qs: QuerySet[JournalEntry]) -> dict[str, tuple[float | None, float | None]]:
    """Per kind, the p50 and p95 of the entries' durations in seconds, in one query."""
    return sql.dialect().percentiles(qs)


def throughput(
    *, since: datetime, bucket: str, now: datetime | None = None, history: bool = False
) -> list[dict[str, Any]]:
    """Completed and failed runs per ``bucket`` ("minute" or "hour") from ``since`` to
    ``now``, oldest first, every bucket present (zero where nothing ran); ``dead``
    counts the failed runs that left their job dead. Reads the journal's time index
    over the window only; with ``history``, the run history instead (as ``stats``)."""
    truncs = {
        "minute": (TruncMinute, timedelta(minutes=1)),
        "hour": (TruncHour, timedelta(hours=1)),
    }
    if bucket not in truncs:
        raise InvalidFilter(f"bucket is minute or hour, got {bucket!r}", argument="bucket")
    trunc, step = truncs[bucket]
    now = now or timezone.now()
    if history:
        slots = read_history(since=since, until=now, step=step).slots
        return [_from_slot(slot) for slot in slots]
    counted: dict[datetime, dict[str, int]] = {}
    rows = (
        sql.journal_entries()
        .filter(recorded_at__gte=since, recorded_at__lte=now)
        .filter(outcome__in=(Outcome.COMPLETED, *_FAILED_OUTCOMES))
        .annotate(at=trunc("recorded_at", tzinfo=UTC))
        .values("at", "outcome")
        .annotate(n=Count("id"))
    )
    for row in rows:
        slot = counted.setdefault(row["at"], {"completed": 0, "failed": 0, "dead": 0})
        slot["completed" if row["outcome"] == Outcome.COMPLETED else "failed"] += row["n"]
        if row["outcome"] == Outcome.DEAD:  # a failed run that left its job dead
            slot["dead"] += row["n"]
    first = _floor(since, step)
    buckets = []
    at = first
    while at <= now:
        slot = counted.get(at, {"completed": 0, "failed": 0, "dead": 0})
        buckets.append({"at": at, **slot})
        at += step
    return buckets


def _from_slot(slot: Slot) -> dict[str, Any]:
    """A history slot as a throughput bucket: its retried (and recovered) and dead runs
    are the failed ones."""
    dead = slot.counts["dead"]
    return {
        "at": slot.at,
        "completed": slot.counts["completed"],
        "failed": slot.counts["retried"] + dead,
        "dead": dead,
    }


def _floor(moment: datetime, step: timedelta) -> datetime:
    moment = moment.astimezone(UTC)
    seconds = int(step.total_seconds())
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)
