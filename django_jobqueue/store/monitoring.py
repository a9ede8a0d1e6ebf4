"""What monitoring reads: run totals by kind and outcome (with duration buckets), for the
metrics view; the freshest worker heartbeat and the oldest due pending job, for the
health check. And what it keeps of the runs a cleanup deletes.

Totals are counted from the database, so every worker process's runs are in them.
They are the journal's runs plus the run tally (``RunTally``): every deletion of
journal entries goes through ``delete_journal``, which adds the runs it deletes to
the tally in the same statement (PostgreSQL) or transaction (SQLite) as the delete.
The totals are read in one statement, so a cleanup is either wholly before a read or
wholly after it: they never fall, as Prometheus counters must not.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Min

from django_jobqueue.models import Outcome, QueuePause, RunTally, Status, WorkerHeartbeat

from . import sql
from .stats import _RUN_OUTCOMES

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


def _runs_of(
    d: sql.Dialect, source: str, where: str = "", params: Sequence[Any] = ()
) -> tuple[str, list[Any]]:
    """A SELECT of the run entries of ``source`` (that also match ``where``, with its
    ``params``) counted by kind and outcome in the columns of the tally, and its
    parameters. An operator's cancel of a pending job is no run (runs, including
    recovered ones, always name their worker) and is left out."""
    is_run, outcomes = d.in_list("outcome", [str(o) for o in _RUN_OUTCOMES])
    if d.postgres:
        total = "coalesce(round(extract(epoch FROM sum(duration)) * 1000000), 0)::bigint"
        bounds: list[Any] = [timedelta(seconds=b) for b in DURATION_BUCKETS]
    else:  # SQLite and MySQL/MariaDB keep a duration as its microseconds
        total = "coalesce(sum(duration), 0)"
        bounds = [round(b * 1_000_000) for b in DURATION_BUCKETS]
    buckets = ", ".join(f"count(*) FILTER (WHERE duration <= %s) AS {c}" for c in TALLY_BUCKETS)
    if d.mysql:  # no FILTER clause there
        buckets = ", ".join(
            f"count(CASE WHEN duration <= %s THEN 1 END) AS {c}" for c in TALLY_BUCKETS
        )
    statement = (
        "SELECT kind, outcome, count(*) AS runs, count(duration) AS timed,"
        f" {total} AS microseconds, {buckets} FROM {source}"
        f" WHERE {where + ' AND ' if where else ''}{is_run} AND NOT (outcome = %s AND worker = '')"
        " GROUP BY kind, outcome"
    )
    return statement, [*bounds, *params, *outcomes, str(Outcome.CANCELLED)]


def run_totals() -> list[RunTotal]:
    """Runs by kind and outcome, with their duration buckets: the journal's and the
    tally's, in one statement (one snapshot: never half a cleanup)."""
    d = sql.dialect()
    live, params = _runs_of(d, sql.JOURNAL)
    sums = ", ".join(f"sum({c})" for c in _COUNTS)
    columns = ", ".join(_COUNTS)
    rows = d.run(
        f"SELECT kind, outcome, {sums} FROM ({live} UNION ALL "
        f"SELECT kind, outcome, {columns} FROM {TALLY}) AS t "
        "GROUP BY kind, outcome ORDER BY kind, outcome",
        params,
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
    """Delete the journal entries of these jobs and add their runs to the run tally, in
    the caller's transaction. The one way journal entries are ever deleted (cleanup,
    the admin's delete), so the run counters never fall.

    On PostgreSQL one statement deletes the entries and tallies what it deleted. On
    MySQL/MariaDB the entries are locked, tallied, then deleted. On
    SQLite the tally is counted first, then the entries deleted: SQLite has one writer
    at a time and the first write makes this transaction the writer (or fails it,
    tallying nothing), so nothing changes in between. Tally rows are upserted in
    (kind, outcome) order, so two cleanups at once lock them in the same order: one
    waits for the other's short batch, never a deadlock (workers never touch the
    tally, so never wait on it)."""
    if not job_ids:
        return
    d = sql.dialect()
    of_jobs, ids = d.in_list("job_id", [d.job_id(i) for i in job_ids])
    columns = ", ".join(("kind", "outcome", *_COUNTS))
    add = ", ".join(f"{c} = {TALLY}.{c} + excluded.{c}" for c in _COUNTS)
    upsert = f" ORDER BY kind, outcome ON CONFLICT (kind, outcome) DO UPDATE SET {add}"
    if d.postgres:
        counted, params = _runs_of(d, "gone")
        d.run(
            f"WITH gone AS (DELETE FROM {sql.JOURNAL} WHERE {of_jobs}"
            " RETURNING kind, outcome, duration, worker) "
            f"INSERT INTO {TALLY} ({columns}) {counted}{upsert}",
            [*ids, *params],
        )
        return
    if d.mysql:
        # The entries locked first (a concurrent cleanup of the same jobs waits here,
        # then counts none of them: gone), counted into the tally (ON DUPLICATE KEY,
        # from a derived table since the count groups), then deleted.
        d.run(f"SELECT id FROM {sql.JOURNAL} WHERE {of_jobs} ORDER BY id FOR UPDATE", ids)
        counted, params = _runs_of(d, sql.JOURNAL, of_jobs, ids)
        add = ", ".join(f"{c} = {TALLY}.{c} + n.{c}" for c in _COUNTS)
        d.run(
            f"INSERT INTO {TALLY} ({columns}) SELECT {columns} FROM ({counted}) AS n"
            f" ORDER BY kind, outcome ON DUPLICATE KEY UPDATE {add}",
            params,
        )
        d.run(f"DELETE FROM {sql.JOURNAL} WHERE {of_jobs}", ids)
        return
    counted, params = _runs_of(d, sql.JOURNAL, of_jobs, ids)
    d.run(f"INSERT INTO {TALLY} ({columns}) {counted}{upsert}", params)
    d.run(f"DELETE FROM {sql.JOURNAL} WHERE {of_jobs}", ids)


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
