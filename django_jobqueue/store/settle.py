"""Ending runs: every settlement (a worker's, a stale recovery's, a release at shutdown)
goes through ``apply``, the one code path that changes a claimed row, writes its
journal entry and counts its run in the run tally (what the metrics read), in one
statement per batch.

The guard is the row's status (claimed), ``claimed_by`` and run number: a settlement
whose claim was taken over writes nothing, neither row nor journal. On PostgreSQL the
guarded UPDATE and the journal INSERT are one data-modifying CTE, so each job's
settlement and its entry commit together; on SQLite they are two statements in one
transaction. MySQL/MariaDB have no ``UPDATE … RETURNING``: there one transaction locks
the batch's rows (``SELECT … FOR UPDATE``), checks each guard on the locked row, updates
each guarded row (the guard repeated in its WHERE) and inserts the entries.

An operator's cancel request is read inside the same statement: each settlement
travels with the ending ``lifecycle.on_cancel_request`` gives it instead (if any), and
the statement picks that one when the row carries the request.
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
from django_jobqueue.models import Outcome, Status
from django_jobqueue.run.lifecycle import Policy, Run, Settlement, failure, on_cancel_request
from django_jobqueue.store import sql
from django_jobqueue.store.monitoring import bucket_of, shard_of, tally_insert, tally_rows

logger = logging.getLogger("django_jobqueue")

# The columns of the ``s`` relation, one row per settlement, with their PostgreSQL types
# (the batch travels as one JSON document there; SQLite gets VALUES).
_S_COLUMNS = {
    "id": "uuid",
    "run_no": "int",
    "kind": "text",
    "status": "text",
    "outcome": "text",
    "visible_at": "timestamptz",
    "failed": "int",
    "carry": "jsonb",
    "result": "jsonb",
    "note": "text",
    "attachment": "jsonb",
    "started_at": "timestamptz",
    "duration": "float8",
    "worker": "text",
    "recorded_at": "timestamptz",
    "claimed": "text",
    # the ending instead, if an operator asked to cancel (NULL: the run keeps its own)
    "c_status": "text",
    "c_outcome": "text",
    "c_note": "text",
    # for the run tally: the shard this thread adds to, the duration and its bucket
    "shard": "int",
    "micros": "bigint",
    "bucket": "int",
}
_RECORDSET = ", ".join(f"{name} {kind}" for name, kind in _S_COLUMNS.items())

# ``t`` is the row before the update, ``s`` the settlement.
_OVERRIDE = "(t.cancel_requested AND s.c_status IS NOT NULL)"
_STATUS = f"CASE WHEN {_OVERRIDE} THEN s.c_status ELSE s.status END"
_GOES_PENDING = f"({_STATUS}) = 'pending'"
_SET = (
    f"status = {_STATUS},"
    f" visible_at = CASE WHEN {_GOES_PENDING} THEN s.visible_at ELSE t.visible_at END,"
    " claimed_by = '', claim_expires_at = NULL,"
    " failure_count = t.failure_count + s.failed,"
    " carry = COALESCE(s.carry, t.carry), result = s.result,"
    f" finished_at = CASE WHEN {_GOES_PENDING} THEN NULL ELSE s.recorded_at END,"
    " cancel_requested = FALSE"
)
# The guard compares the status with the settlement's ``claimed`` rather than a literal:
# a literal would let the planner read every row ever claimed through the partial lease
# index (dead entries included, until vacuum) instead of the few ids by primary key.
_GUARD = (
    "t.id = s.id AND t.status = s.claimed AND t.claimed_by = s.worker AND t.run_count = s.run_no"
)
# ``j`` is the row after the update: it took the alternative ending if its status is that one's.
_OVERRIDDEN = "(s.c_status IS NOT NULL AND j.status = s.c_status)"
_JOURNAL_COLUMNS = (
    "job_id, kind, run_no, outcome, started_at, recorded_at, duration, note, attachment,"
    " worker, actor"
)
_OUTCOME = f"CASE WHEN {_OVERRIDDEN} THEN s.c_outcome ELSE s.outcome END"
_JOURNAL_SELECT = (
    f"SELECT s.id, s.kind, s.run_no, {_OUTCOME},"
    " s.started_at, s.recorded_at, {duration},"
    f" CASE WHEN {_OVERRIDDEN} THEN s.c_note ELSE s.note END,"
    f" s.attachment, s.worker, CASE WHEN {_OVERRIDDEN} THEN j.cancel_actor ELSE '' END"
)


def apply(settlements: Sequence[Settlement], *, now: datetime | None = None) -> list[bool]:
    """Apply settlements, each only if its guard holds; per settlement, whether it was."""
    if not settlements:
        return []
    now = now or timezone.now()
    d = sql.dialect()
    batch = unique(settlements)
    held = d.conn.in_atomic_block  # inside the caller's transaction (see shard_of)
    if d.postgres:
        applied = _apply_postgres(d, batch, now, held)
    elif d.mysql:
        applied = _apply_mysql(d, batch, now, held)
    else:
        applied = _apply_sqlite(d, [_row(d, s, now, held) for s in batch])
    return outcome(settlements, applied)


def _document(s: Settlement, now: datetime, held: bool) -> dict[str, Any]:
    """A settlement as a JSON object for ``jsonb_to_recordset`` (absent: NULL)."""
    doc: dict[str, Any] = {
        "id": str(s.job_id),
        "run_no": s.run_no,
        "kind": s.kind,
        "status": s.status,
        "outcome": s.outcome,
        "failed": 1 if s.failed else 0,
        "note": s.note.strip(),
        "worker": s.worker,
        "recorded_at": now.isoformat(),
        "claimed": Status.CLAIMED,
    }
    for name in ("carry", "result", "attachment"):
        value = getattr(s, name)
        if value is not None:
            doc[name] = value
    for name in ("visible_at", "started_at"):
        value = getattr(s, name)
        if value is not None:
            doc[name] = value.isoformat()
    doc["shard"] = shard_of(s.worker, held=held)
    if s.duration is not None:
        doc["duration"] = s.duration.total_seconds()
        doc["micros"] = duration_microseconds(s.duration)
        doc["bucket"] = bucket_of(doc["micros"])
    instead = on_cancel_request(s)
    if instead is not None:
        doc.update(c_status=instead.status, c_outcome=instead.outcome, c_note=instead.note)
    return doc


def _row(d: sql.Dialect, s: Settlement, now: datetime, held: bool) -> tuple[Any, ...]:
    instead = on_cancel_request(s)
    micros = None if s.duration is None else duration_microseconds(s.duration)
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
        micros,
        s.worker,
        d.dt(now),
        Status.CLAIMED,
        None if instead is None else instead.status,
        None if instead is None else instead.outcome,
        None if instead is None else instead.note,
        shard_of(s.worker, held=held),
        micros,
        bucket_of(micros),
    )


# Each applied settlement's run, for the tally (``j``: the job row after the update).
_TALLIED = f"SELECT s.kind, {_OUTCOME} AS outcome, s.shard, s.micros, s.bucket FROM {{joined}}"

# The settlement CTEs on PostgreSQL: ``j`` holds the rows it changed.
SETTLE_CTES = (
    f"s AS (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS s({_RECORDSET})),"
    f" j AS (UPDATE {sql.JOB} AS t SET {_SET} FROM s"
    f" WHERE t.id = ANY(ARRAY(SELECT id FROM s)) AND {_GUARD}"
    " RETURNING t.id, t.status, t.cancel_actor),"
    f" entries AS (INSERT INTO {sql.JOURNAL} ({_JOURNAL_COLUMNS})"
    f" {_JOURNAL_SELECT.format(duration='make_interval(secs => s.duration)')}"
    " FROM j JOIN s ON s.id = j.id),"
    # The runs counted, in the same statement: the metrics never read the journal.
    f" tallied AS ({tally_insert(_TALLIED.format(joined='j JOIN s ON s.id = j.id'))})"
)


def _kept(settlements: Sequence[Settlement]) -> dict[uuid.UUID, int]:
    """Per job, the index of the one settlement of it the batch applies: its latest run's.

    A worker may end two runs of one job in a turn (its first claim was recovered and it
    claimed the job again); only the latest run can still hold the claim, so an earlier
    run must not stand in its way. A repeat of the same run is dropped.
    """
    kept: dict[uuid.UUID, int] = {}
    for i, s in enumerate(settlements):
        held = kept.get(s.job_id)
        if held is None or s.run_no > settlements[held].run_no:
            kept[s.job_id] = i
    return kept


def unique(settlements: Sequence[Settlement]) -> list[Settlement]:
    """One settlement per job (see ``_kept``), in the order the jobs first appear."""
    return [settlements[i] for i in _kept(settlements).values()]


def document(settlements: Sequence[Settlement], now: datetime, *, held: bool = False) -> str:
    """The batch as the one JSON parameter of ``SETTLE_CTES`` (``held``: written inside
    the caller's transaction; a worker's turn is not)."""
    return sql.dumps([_document(s, now, held) for s in settlements])


def outcome(settlements: Sequence[Settlement], applied: set[uuid.UUID]) -> list[bool]:
    """Per settlement, whether it was applied (``applied``: the jobs the batch of
    ``unique(settlements)`` changed); a dropped one is logged."""
    kept = _kept(settlements)
    result = []
    for i, s in enumerate(settlements):
        ok = s.job_id in applied and kept[s.job_id] == i
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


def _apply_postgres(
    d: sql.Dialect, batch: list[Settlement], now: datetime, held: bool
) -> set[uuid.UUID]:
    rows = d.run(f"WITH {SETTLE_CTES} SELECT id FROM j", [document(batch, now, held=held)])
    return {d.read_uuid(r[0]) for r in rows}


def _apply_sqlite(d: sql.Dialect, rows: list[tuple[Any, ...]]) -> set[uuid.UUID]:
    values = ", ".join([f"({sql.placeholders(len(_S_COLUMNS))})"] * len(rows))
    s_cte = f"WITH s({', '.join(_S_COLUMNS)}) AS (VALUES {values})"
    params = sql.flatten(rows)
    with transaction.atomic(using=sql.alias()), d.conn.cursor() as cursor:
        cursor.execute(
            f"{s_cte} UPDATE {sql.JOB} AS t SET {_SET} FROM s WHERE {_GUARD} RETURNING id",
            params,
        )
        done = [r[0] for r in cursor.fetchall()]
        if done:
            cursor.execute(
                f"{s_cte} INSERT INTO {sql.JOURNAL} ({_JOURNAL_COLUMNS})"
                f" {_JOURNAL_SELECT.format(duration='s.duration')}"
                f" FROM s JOIN {sql.JOB} AS j ON j.id = s.id"
                f" WHERE j.id IN ({sql.placeholders(len(done))})",
                [*params, *done],
            )
            joined = (
                f"s JOIN {sql.JOB} AS j ON j.id = s.id"
                f" WHERE j.id IN ({sql.placeholders(len(done))})"
            )
            cursor.execute(
                f"{s_cte} {tally_insert(_TALLIED.format(joined=joined))}", [*params, *done]
            )
    return {d.read_uuid(v) for v in done}


def _apply_mysql(
    d: sql.Dialect, batch: list[Settlement], now: datetime, held: bool
) -> set[uuid.UUID]:
    """The batch on MySQL/MariaDB: guarded row updates, their entries and their runs'
    tally, one transaction."""
    by_id = {d.job_id(s.job_id): s for s in batch}
    ids_sql, ids_params = d.in_list("id", list(by_id))
    done: set[uuid.UUID] = set()
    entries: list[Any] = []
    runs: list[tuple[str, str, int, int | None]] = []  # for the tally
    with transaction.atomic(using=sql.alias()), d.conn.cursor() as cursor:
        cursor.execute(
            f"SELECT id, status, claimed_by, run_count, cancel_requested, cancel_actor"
            f" FROM {sql.JOB} WHERE {ids_sql} FOR UPDATE",
            ids_params,
        )
        locked = {d.read_uuid(r[0]): r[1:] for r in cursor.fetchall()}
        for s in batch:
            row = locked.get(s.job_id)
            ending = None if row is None else _mysql_update(d, cursor, s, row, now)
            if ending is None:
                continue
            done.add(s.job_id)
            micros = None if s.duration is None else duration_microseconds(s.duration)
            runs.append((s.kind, ending[1], shard_of(s.worker, held=held), micros))
            entries += [
                d.job_id(s.job_id),
                s.kind,
                s.run_no,
                ending[1],
                d.dt(s.started_at),
                d.dt(now),
                micros,
                ending[2],
                None if s.attachment is None else sql.dumps(s.attachment),
                s.worker,
                ending[3],
            ]
        if done:
            one = f"({sql.placeholders(11)})"
            cursor.execute(
                f"INSERT INTO {sql.JOURNAL} ({_JOURNAL_COLUMNS}) VALUES "
                + ", ".join([one] * len(done)),
                entries,
            )
            cursor.execute(*tally_rows(runs))
    return done


def _mysql_update(
    d: sql.Dialect, cursor: Any, s: Settlement, row: Sequence[Any], now: datetime
) -> tuple[str, str, str, str] | None:
    """Apply one settlement to its locked row if the guard holds: its ending (status,
    outcome, note, actor), or None when the claim is no longer this run's."""
    status, claimed_by, run_count, cancel_flag, cancel_actor = row
    if (status, claimed_by, run_count) != (Status.CLAIMED, s.worker, s.run_no):
        return None
    instead = on_cancel_request(s) if cancel_flag else None
    ending = (
        (s.status, s.outcome, s.note.strip(), "")
        if instead is None
        else (instead.status, instead.outcome, instead.note, cancel_actor)
    )
    pending = ending[0] == Status.PENDING
    cursor.execute(
        f"UPDATE {sql.JOB} SET status = %s,"
        f" visible_at = {'%s' if pending else 'visible_at'},"
        " claimed_by = '', claim_expires_at = NULL,"
        " failure_count = failure_count + %s, carry = COALESCE(%s, carry),"
        " result = %s, finished_at = %s, cancel_requested = FALSE"
        " WHERE id = %s AND status = %s AND claimed_by = %s AND run_count = %s",
        [
            ending[0],
            *([d.dt(s.visible_at)] if pending else []),
            1 if s.failed else 0,
            None if s.carry is None else sql.dumps(s.carry),
            None if s.result is None else sql.dumps(s.result),
            None if pending else d.dt(now),
            d.job_id(s.job_id),
            Status.CLAIMED,
            s.worker,
            s.run_no,
        ],
    )
    # rowcount 1 always while the row is locked; checked defensively
    return ending if cursor.rowcount == 1 else None


def settle(*, worker_id: str, settlements: Sequence[Settlement]) -> list[bool]:
    """Apply a worker's run endings in one batch, guarded by its own claims."""
    return apply([as_worker(s, worker_id) for s in settlements])


def as_worker(s: Settlement, worker_id: str) -> Settlement:
    """The settlement guarded by ``worker_id``'s claim."""
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
    d = sql.dialect()
    total = 0
    while True:
        now_ = now or timezone.now()
        # The usual answer is none, found without opening a transaction.
        if not d.run(_ANY_EXPIRED, [d.dt(now_)]):
            return total
        with transaction.atomic(using=sql.alias()):
            rows = d.run(_EXPIRED + d.skip_locked, [d.dt(now_), batch_size])
            settlements = [
                failure(
                    Run(job_id=d.read_uuid(job_id), kind=kind, run_no=run_no, worker=claimed_by),
                    failure_count=failure_count,
                    policy=policy_of(kind),
                    now=now_,
                    note=(
                        f"lease expired at {d.read_dt(expired):%Y-%m-%d %H:%M:%S%z} "
                        f"(worker {claimed_by} gone)"
                    ),
                    outcome=Outcome.STALE_RECOVERED,
                )
                for job_id, kind, claimed_by, expired, run_no, failure_count in rows
            ]
            apply(settlements, now=now_)
        total += len(rows)
        for s in settlements:
            logger.info("recovered job=%s kind=%s outcome=%s", s.job_id, s.kind, s.outcome)
        if len(rows) < batch_size:
            return total


# Expired leases, oldest first, by the partial lease index.
_ANY_EXPIRED = f"SELECT 1 FROM {sql.JOB} WHERE status = 'claimed' AND claim_expires_at < %s LIMIT 1"
_EXPIRED = (
    f"SELECT id, kind, claimed_by, claim_expires_at, run_count, failure_count FROM {sql.JOB}"
    " WHERE status = 'claimed' AND claim_expires_at < %s ORDER BY claim_expires_at LIMIT %s"
)


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
    [(visible, expiry)] = d.run(statement, params)
    return d.read_dt(visible), d.read_dt(expiry)
