"""What monitoring reads: run totals by kind and outcome (with duration buckets), for the
metrics view; the freshest worker heartbeat and the oldest due pending job, for the
health check. And the run tally that keeps those totals.

Totals are counted in the database, so every worker process's runs are in them, and
never by reading the journal: every settlement adds its runs to the run tally
(``RunTally``) in its own guarded write (``tally_insert``, ``tally_rows``), so a run is
counted exactly when its ending commits, and a scrape reads a few tally rows whatever
the size of the journal. Deleting journal entries (``delete_journal``: cleanup, the
admin's delete) leaves the tally alone, so the totals never fall, as Prometheus
counters must not.
"""

from __future__ import annotations

import threading
import uuid
import zlib
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Max

from django_jobqueue.models import QueuePause, RunTally, Status, WorkerHeartbeat
from django_jobqueue.store import sql

# Upper bounds (seconds) of the run-duration histogram's buckets; +Inf is implied.
# RunTally has one column per bound (``TALLY_BUCKETS``): a change here needs a migration.
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

# RunTally's bucket columns, in the order of DURATION_BUCKETS.
TALLY_BUCKETS: tuple[str, ...] = tuple(
    f.name for f in RunTally._meta.concrete_fields if f.name.startswith("le_")
)

TALLY = RunTally._meta.db_table
_COUNTS = ("runs", "timed", "microseconds", *TALLY_BUCKETS)


@dataclass(frozen=True)
class RunTotal:
    """The runs of one kind that ended with one outcome, over the journal's history
    (cleaned-up runs included)."""

    kind: str
    outcome: str
    runs: int
    timed: int  # runs with a recorded duration (a run released at shutdown has none)
    seconds: float  # their durations, summed
    buckets: tuple[int, ...]  # per DURATION_BUCKETS bound, timed runs at most that long


# How many tally rows each (kind, outcome) is spread over: a worker thread adds to its
# own (``shard_of``), so concurrent settlements of one kind seldom wait on one row, and a
# read sums at most this many rows per kind and outcome.
TALLY_SHARDS = 16
# The bounds in microseconds, for ``bucket_of``.
_BOUND_MICROS = tuple(round(b * 1_000_000) for b in DURATION_BUCKETS)
# Per bucket column, the runs whose first bound within reach is at most that one's
# (the indexes are the columns' positions, not values: the statement's own shape).
_BUCKET_COUNTS = ", ".join(
    f"count(CASE WHEN bucket <= {i} THEN 1 END)" for i in range(len(TALLY_BUCKETS))
)
_KEYED = ("kind", "outcome", "shard", *_COUNTS)


def shard_of(worker: str, *, held: bool) -> int:
    """The tally shard this thread of ``worker`` adds a settlement to; ``held``: the
    settlement is written inside the caller's transaction (an atomic task's), so it
    holds its tally row until the caller commits. Those take the upper half of the
    shards and every other settlement (the worker loop's turns, in a statement or a
    short transaction of their own) the lower half: the loop never waits on a row that
    a task's open transaction holds (on MySQL/MariaDB, the insert that creates a
    shard's row may still wait once, on InnoDB's gap lock beside a new row of an open
    transaction). Within a half, by worker and thread, so that workers settling one
    kind at once seldom share a row."""
    half = TALLY_SHARDS // 2
    key = f"{worker}/{threading.current_thread().name}"
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % half + (half if held else 0)


def bucket_of(micros: int | None) -> int | None:
    """The index of the first histogram bound a duration (in microseconds) is within
    (``len(DURATION_BUCKETS)`` past the last); None for a run without a duration."""
    return None if micros is None else bisect_left(_BOUND_MICROS, micros)


def tally_insert(relation: str) -> str:
    """The upsert adding the runs of ``relation`` (a SELECT with the columns ``kind``,
    ``outcome``, ``shard``, ``micros``, ``bucket``: one row per run) to the tally, for
    PostgreSQL and SQLite. Rows are upserted in key order, so two settlements that add
    to the same rows lock them in the same order: one waits, never a deadlock."""
    add = ", ".join(f"{c} = {TALLY}.{c} + excluded.{c}" for c in _COUNTS)
    return (
        f"INSERT INTO {TALLY} ({', '.join(_KEYED)})"
        " SELECT kind, outcome, shard, count(*), count(micros), coalesce(sum(micros), 0),"
        f" {_BUCKET_COUNTS} FROM ({relation}) AS r"
        " GROUP BY kind, outcome, shard ORDER BY kind, outcome, shard"
        f" ON CONFLICT (kind, outcome, shard) DO UPDATE SET {add}"
    )


def tally_rows(runs: Iterable[tuple[str, str, int, int | None]]) -> tuple[str, list[Any]]:
    """The upsert adding ``runs`` (kind, outcome, shard, microseconds or None) to the
    tally on MySQL/MariaDB, counted here (the caller knows each run's ending), and its
    parameters; in key order, as ``tally_insert``."""
    counted: dict[tuple[str, str, int], list[int]] = {}
    for kind, outcome, shard, micros in runs:
        counts = counted.setdefault((kind, outcome, shard), [0] * len(_COUNTS))
        counts[0] += 1
        if micros is not None:
            counts[1] += 1
            counts[2] += micros
            for i in range(bisect_left(_BOUND_MICROS, micros), len(TALLY_BUCKETS)):
                counts[3 + i] += 1
    one = ", ".join(f"%s AS {c}" for c in _KEYED)
    rows = " UNION ALL ".join([f"SELECT {one}"] * len(counted))
    add = ", ".join(f"{c} = {TALLY}.{c} + n.{c}" for c in _COUNTS)
    statement = (
        f"INSERT INTO {TALLY} ({', '.join(_KEYED)}) SELECT * FROM ({rows}) AS n"
        f" ORDER BY kind, outcome, shard ON DUPLICATE KEY UPDATE {add}"
    )
    return statement, [v for key in sorted(counted) for v in (*key, *counted[key])]


def run_totals() -> list[RunTotal]:
    """Runs by kind and outcome, with their duration buckets, from the tally alone (one
    statement; a run is in it once its settlement committed)."""
    d = sql.dialect()
    sums = ", ".join(f"sum({c})" for c in _COUNTS)
    rows = d.run(
        f"SELECT kind, outcome, {sums} FROM {TALLY} GROUP BY kind, outcome ORDER BY kind, outcome",
        [],
    )
    return [
        RunTotal(
            kind=kind,
            outcome=outcome,
            runs=int(runs),
            timed=int(timed),
            seconds=int(micros) / 1_000_000,
            buckets=tuple(int(n) for n in buckets),
        )
        for kind, outcome, runs, timed, micros, *buckets in rows
    ]


def delete_journal(*, job_ids: Sequence[uuid.UUID]) -> None:
    """Delete the journal entries of these jobs, in the caller's transaction (cleanup, the
    admin's delete). Their runs stay counted: the tally counted them when they were
    settled, so the run counters never fall."""
    sql.dialect().delete_journal(job_ids)


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
    pending = pending.exclude(queue__in=paused).order_by("visible_at")
    # The first of each priority, by the claim index (``sql.PRIORITIES``).
    firsts = [
        first
        for p in sql.PRIORITIES
        for first in pending.filter(priority=p).values_list("visible_at", flat=True)[:1]
    ]
    return min(firsts, default=None)
