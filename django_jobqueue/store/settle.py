"""Ending runs: every settlement (a worker's, a stale recovery's, a release at shutdown)
goes through ``apply``, the one code path that changes a claimed row and writes its
journal entry, in one statement per batch.

The guard is the row's status (claimed), ``claimed_by`` and run number: a settlement
whose claim was taken over writes nothing, neither row nor journal. On PostgreSQL the
guarded UPDATE and the journal INSERT are one data-modifying CTE, so each job's
settlement and its entry commit together; on SQLite they are two statements in one
transaction.

The rule of an operator's cancel request lives here too, once, in SQL: a run that
would send its job back to pending (a retry, a pause, a release, a stale recovery)
ends it ``cancelled`` instead; a run that completed or died keeps its ending.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.duration import duration_microseconds

from django_jobqueue import conf
from django_jobqueue.lifecycle import Policy, Settlement, failure
from django_jobqueue.models import Outcome, Status

from . import sql

logger = logging.getLogger("django_jobqueue")

# The columns of the ``s`` relation: one row per settlement.
_S_COLUMNS = (
    "id",
    "run_no",
    "kind",
    "status",
    "outcome",
    "visible_at",
    "failed",
    "carry",
    "result",
    "note",
    "attachment",
    "started_at",
    "duration",
    "worker",
    "recorded_at",
)
_PG_TYPES = (
    "uuid",
    "int",
    "text",
    "text",
    "text",
    "timestamptz",
    "int",
    "text",
    "text",
    "text",
    "text",
    "timestamptz",
    "interval",
    "text",
    "timestamptz",
)

# ``t`` is the row before the update, ``s`` the settlement. A pending ending of a run
# whose job an operator asked to cancel becomes ``cancelled``.
_GOES_PENDING = "(s.status = 'pending' AND NOT t.cancel_requested)"
_SET = (
    "status = CASE WHEN s.status = 'pending' AND t.cancel_requested THEN 'cancelled'"
    " ELSE s.status END,"
    f" visible_at = CASE WHEN {_GOES_PENDING} THEN s.visible_at ELSE t.visible_at END,"
    " claimed_by = '', claim_expires_at = NULL,"
    " failure_count = t.failure_count + s.failed,"
    " carry = COALESCE(s.carry{json}, t.carry), result = s.result{json},"
    f" finished_at = CASE WHEN {_GOES_PENDING} THEN NULL ELSE s.recorded_at END,"
    " cancel_requested = FALSE"
)
_GUARD = (
    "t.id = s.id AND t.status = 'claimed' AND t.claimed_by = s.worker AND t.run_count = s.run_no"
)
# ``j`` is the row after the update.
_OVERRIDDEN = "(s.status = 'pending' AND j.status = 'cancelled')"
_JOURNAL_COLUMNS = (
    "job_id, kind, run_no, outcome, started_at, recorded_at, duration, note, attachment,"
    " worker, actor"
)
_JOURNAL_SELECT = (
    f"SELECT s.id, s.kind, s.run_no, CASE WHEN {_OVERRIDDEN} THEN 'cancelled' ELSE s.outcome END,"
    " s.started_at, s.recorded_at, s.duration,"
    f" CASE WHEN {_OVERRIDDEN} THEN 'cancelled on request'"
    " || CASE WHEN j.cancel_actor <> '' THEN ' by ' || j.cancel_actor ELSE '' END"
    " || ' (run ended: ' || s.outcome || ')'"
    " || CASE WHEN s.note <> '' THEN {newline} || s.note ELSE '' END ELSE s.note END,"
    f" s.attachment{{json}}, s.worker, CASE WHEN {_OVERRIDDEN} THEN j.cancel_actor ELSE '' END"
)


def apply(settlements: Sequence[Settlement], *, now: datetime | None = None) -> list[bool]:
    """Apply settlements, each only if its guard holds; per settlement, whether it was."""
    if not settlements:
        return []
    now = now or timezone.now()
    d = sql.dialect()
    seen: set[uuid.UUID] = set()
    unique: list[Settlement] = []
    for s in settlements:
        if s.job_id not in seen:  # a job settles once per batch; a repeat is dropped
            seen.add(s.job_id)
            unique.append(s)
    rows = [_row(d, s, now) for s in unique]
    applied = _apply_postgres(d, rows) if d.postgres else _apply_sqlite(d, rows)
    result = []
    for s in settlements:
        ok = s.job_id in applied
        applied.discard(s.job_id)
        result.append(ok)
        if not ok:
            logger.info(
                "dropped settlement job=%s kind=%s run=%s outcome=%s: claim no longer ours",
                s.job_id,
                s.kind,
                s.run_no,
                s.outcome,
            )
    return result


def _row(d: sql.Dialect, s: Settlement, now: datetime) -> tuple[Any, ...]:
    duration: Any = s.duration
    if duration is not None and not d.postgres:
        duration = duration_microseconds(duration)
    return (
        d.job_id(s.job_id),
        s.run_no,
        s.kind,
        s.status,
        s.outcome,
        d.dt(s.visible_at),
        1 if s.failed else 0,
        None if s.carry is None else sql.dumps(s.carry),
        None if s.result is None else sql.dumps(s.result),
        s.note.strip(),
        None if s.attachment is None else sql.dumps(s.attachment),
        d.dt(s.started_at),
        duration,
        s.worker,
        d.dt(now),
    )


def _apply_postgres(d: sql.Dialect, rows: list[tuple[Any, ...]]) -> set[uuid.UUID]:
    arrays = ", ".join(f"%s::{t}[]" for t in _PG_TYPES)
    statement = (
        f"WITH s AS (SELECT * FROM unnest({arrays}) AS s({', '.join(_S_COLUMNS)})),"
        f" j AS (UPDATE {sql.JOB} AS t SET {_SET.format(json='::jsonb')}"
        f" FROM s WHERE {_GUARD} RETURNING t.id, t.status, t.cancel_actor),"
        f" entries AS (INSERT INTO {sql.JOURNAL} ({_JOURNAL_COLUMNS})"
        f" {_JOURNAL_SELECT.format(json='::jsonb', newline='chr(10)')}"
        " FROM j JOIN s ON s.id = j.id)"
        " SELECT id FROM j"
    )
    columns = [list(c) for c in zip(*rows, strict=True)]
    with d.conn.cursor() as cursor:
        cursor.execute(statement, columns)
        return {d.read_uuid(r[0]) for r in cursor.fetchall()}


def _apply_sqlite(d: sql.Dialect, rows: list[tuple[Any, ...]]) -> set[uuid.UUID]:
    values = ", ".join([f"({sql.placeholders(len(_S_COLUMNS))})"] * len(rows))
    s_cte = f"WITH s({', '.join(_S_COLUMNS)}) AS (VALUES {values})"
    params = sql.flatten(rows)
    with transaction.atomic(using=sql.alias()), d.conn.cursor() as cursor:
        cursor.execute(
            f"{s_cte} UPDATE {sql.JOB} AS t SET {_SET.format(json='')}"
            f" FROM s WHERE {_GUARD} RETURNING id",
            params,
        )
        done = [r[0] for r in cursor.fetchall()]
        if done:
            cursor.execute(
                f"{s_cte} INSERT INTO {sql.JOURNAL} ({_JOURNAL_COLUMNS})"
                f" {_JOURNAL_SELECT.format(json='', newline='char(10)')}"
                f" FROM s JOIN {sql.JOB} AS j ON j.id = s.id"
                f" WHERE j.id IN ({sql.placeholders(len(done))})",
                [*params, *done],
            )
    return {d.read_uuid(v) for v in done}


def settle(*, worker_id: str, settlements: Sequence[Settlement]) -> list[bool]:
    """Apply a worker's run endings in one batch, guarded by its own claims."""
    return apply([_as_worker(s, worker_id) for s in settlements])


def _as_worker(s: Settlement, worker_id: str) -> Settlement:
    return s if s.worker == worker_id else replace(s, worker=worker_id)


def recover_expired(
    *,
    policy_for: Callable[[str], Policy] | None = None,
    now: datetime | None = None,
    batch_size: int = 500,
) -> int:
    """Return jobs whose lease ran out (their worker died) to pending, counting a failure.

    Batches of ``batch_size`` rows (skip-locked, so workers recovering at once share
    the work) until a batch comes back short; each batch is settled through ``apply``
    as if the lost worker had failed its run. Returns how many were recovered.
    """
    policy_of = policy_for or (lambda kind: conf.get().policy())
    total = 0
    while True:
        now_ = now or timezone.now()
        expired = sql.jobs().filter(status=Status.CLAIMED, claim_expires_at__lt=now_)
        if not expired.exists():  # the usual answer, without opening a transaction
            return total
        with transaction.atomic(using=sql.alias()):
            rows = list(
                sql.lockable(expired, skip_locked=True)
                .only("id", "kind", "claimed_by", "claim_expires_at", "run_count", "failure_count")
                .order_by("claim_expires_at")[:batch_size]
            )
            settlements = [
                failure(
                    job_id=job.id,
                    kind=job.kind,
                    run_no=job.run_count,
                    failure_count=job.failure_count,
                    policy=policy_of(job.kind),
                    now=now_,
                    note=(
                        f"lease expired at {job.claim_expires_at:%Y-%m-%d %H:%M:%S%z} "
                        f"(worker {job.claimed_by} gone)"
                    ),
                    outcome=Outcome.STALE_RECOVERED,
                    worker=job.claimed_by,
                )
                for job in rows
            ]
            apply(settlements, now=now_)
        total += len(rows)
        for s in settlements:
            logger.info("recovered job=%s kind=%s outcome=%s", s.job_id, s.kind, s.outcome)
        if len(rows) < batch_size:
            return total


def extend_leases(*, worker_id: str, runs: Mapping[uuid.UUID, int], until: datetime) -> int:
    """Push the lease of this worker's running jobs to ``until`` (guarded by run number)."""
    if not runs:
        return 0
    guard = Q()
    for job_id, run_no in runs.items():
        guard |= Q(id=job_id, run_count=run_no)
    return (
        sql.jobs()
        .filter(guard, status=Status.CLAIMED, claimed_by=worker_id)
        .update(claim_expires_at=until)
    )


def cancel_requested(*, job_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these running jobs an operator asked to cancel."""
    ids = list(job_ids)
    if not ids:
        return set()
    return set(sql.jobs().filter(id__in=ids, cancel_requested=True).values_list("id", flat=True))


def next_wakeup(
    *, kinds: Sequence[str], queues: Sequence[str] | None = None, now: datetime | None = None
) -> tuple[datetime | None, datetime | None]:
    """What an idle worker waits for, in one query: when the next scheduled (delayed,
    backed-off, paused) job of its kinds becomes runnable, and when the earliest lease
    runs out (the next stale-recovery chance)."""
    d = sql.dialect()
    now = now or timezone.now()
    if not kinds:
        visible_sql, params = "NULL", list[Any]()
    else:
        kind_sql, params = d.in_list("kind", kinds)
        visible_sql = (
            f"(SELECT min(visible_at) FROM {sql.JOB} WHERE status = 'pending'"
            f" AND visible_at > %s AND {kind_sql}"
        )
        params = [d.dt(now), *params]
        if queues:
            queue_sql, queue_params = d.in_list("queue", queues)
            visible_sql += f" AND {queue_sql}"
            params += queue_params
        visible_sql += ")"
    statement = (
        f"SELECT {visible_sql}, (SELECT min(claim_expires_at) FROM {sql.JOB}"
        " WHERE status = 'claimed')"
    )
    with d.conn.cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    assert row is not None
    return d.read_dt(row[0]), d.read_dt(row[1])
