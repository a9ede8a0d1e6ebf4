"""What monitoring reads: run totals by kind and outcome (with duration buckets) from
the journal, for the metrics view; the freshest worker heartbeat and the oldest due
pending job, for the health check.

Totals are counted from the journal, so every worker process's runs are in them, and
they cover the history the database still holds: a cleanup that deletes finished
jobs deletes their journal entries, and the totals fall by what it deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, Q, Sum

from django_jobqueue.models import Outcome, QueuePause, Status, WorkerHeartbeat

from . import sql
from .stats import _RUN_OUTCOMES

# Upper bounds (seconds) of the run-duration histogram's buckets; +Inf is implied.
DURATION_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
)


@dataclass(frozen=True)
class RunTotal:
    """The runs of one kind that ended with one outcome, over the journal's history."""

    kind: str
    outcome: str
    runs: int
    timed: int  # runs with a recorded duration (a run released at shutdown has none)
    seconds: float  # their durations, summed
    buckets: tuple[int, ...]  # per DURATION_BUCKETS bound, timed runs at most that long


def run_totals() -> list[RunTotal]:
    """Runs by kind and outcome, with their duration buckets, in one query over the
    journal (an operator's cancel of a pending job is no run and is left out)."""
    entries = (
        sql.journal_entries()
        .filter(outcome__in=_RUN_OUTCOMES)
        .exclude(outcome=Outcome.CANCELLED, worker="")
    )
    aggregates: dict[str, Any] = {
        "runs": Count("id"),
        "timed": Count("duration"),
        "total": Sum("duration"),
    }
    for index, bound in enumerate(DURATION_BUCKETS):
        aggregates[f"le{index}"] = Count("id", filter=Q(duration__lte=timedelta(seconds=bound)))
    grouped: Any = entries.values("kind", "outcome").annotate(**aggregates)
    rows: list[dict[str, Any]] = list(grouped.order_by("kind", "outcome"))
    return [
        RunTotal(
            kind=row["kind"],
            outcome=row["outcome"],
            runs=row["runs"],
            timed=row["timed"],
            seconds=_seconds(row["total"]),
            buckets=tuple(row[f"le{i}"] for i in range(len(DURATION_BUCKETS))),
        )
        for row in rows
    ]


def _seconds(total: Any) -> float:
    if total is None:
        return 0.0
    if isinstance(total, timedelta):
        return total.total_seconds()
    return float(total) / 1_000_000  # microseconds, where the database sums those


def freshest_heartbeat() -> datetime | None:
    """When the most recently seen running (not stopped) worker last beat; None if none."""
    at: datetime | None = (
        WorkerHeartbeat.objects.using(sql.alias())
        .filter(stopped_at__isnull=True)
        .aggregate(at=Max("last_seen_at"))["at"]
    )
    return at


def oldest_due(
    *,
    now: datetime,
    kinds: Sequence[str] | None = None,
    queues: Sequence[str] | None = None,
) -> datetime | None:
    """Since when the longest-waiting runnable job has been due (its ``visible_at``):
    pending, due by ``now``, in a queue that is not paused, of ``kinds`` and in
    ``queues`` when given. None when no job is runnable."""
    pending = sql.jobs().filter(status=Status.PENDING, visible_at__lte=now)
    if kinds is not None:
        pending = pending.filter(kind__in=list(kinds))
    if queues:
        pending = pending.filter(queue__in=list(queues))
    paused = QueuePause.objects.using(sql.alias()).values("queue")
    result: datetime | None = pending.exclude(queue__in=paused).aggregate(at=Min("visible_at"))[
        "at"
    ]
    return result
