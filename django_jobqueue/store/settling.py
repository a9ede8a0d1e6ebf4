"""Ending runs: every settlement (a worker's, a stale recovery's, a release at shutdown)
goes through ``apply``, the one code path that changes a claimed row, writes its
journal entry and counts its run in the run tally (what the metrics read), all or
nothing per batch.

The guard is the row's status (claimed), ``claimed_by`` and run number: a settlement
whose claim was taken over writes nothing, neither row nor journal. This module maps
each settlement to the one row every dialect applies (``settle_row``); the dialect
writes it (one statement on PostgreSQL, a few in one transaction elsewhere: see each
dialect's ``claiming`` module).

An operator's cancel request is read inside the same write: each settlement travels
with the ending ``lifecycle.on_cancel_request`` gives it instead (if any), and the
write picks that one when the row carries the request.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, CharField, F, Field, FloatField, Q, Value, When
from django.utils import timezone
from django.utils.duration import duration_microseconds

from django_jobqueue import conf
from django_jobqueue.models import Outcome, Status
from django_jobqueue.progress import Progress
from django_jobqueue.rules.lifecycle import Policy, Run, Settlement, failure, on_cancel_request
from django_jobqueue.store import joins, runlogs, sql, wakeups
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.settling import SettleRow, Tally
from django_jobqueue.store.monitoring import bucket_of, shard_of, tally_insert, tally_rows

logger = logging.getLogger("django_jobqueue")

# How every settlement's runs are counted (the statements are the monitoring module's).
TALLY = Tally(insert=tally_insert, rows=tally_rows)


def apply(settlements: Sequence[Settlement], *, now: datetime | None = None) -> list[bool]:
    """Apply settlements, each only if its guard holds; per settlement, whether it was.
    The log lines of the runs applied are written with them (``runlogs``)."""
    if not settlements:
        return []
    return runlogs.written_with(settlements, lambda: apply_guarded(settlements, now=now), list)


def apply_guarded(settlements: Sequence[Settlement], *, now: datetime | None = None) -> list[bool]:
    """``apply`` without the runs' log lines (the caller writes them in its transaction)."""
    if not settlements:
        return []
    d = sql.dialect()
    now = now or timezone.now()
    if any(s.step for s in settlements):
        return _apply_with_joins(settlements, now)
    rows = settle_rows(settlements, now, held=d.conn.in_atomic_block)
    return outcome(settlements, d.apply_settlements(rows, TALLY))


def _apply_with_joins(settlements: Sequence[Settlement], now: datetime) -> list[bool]:
    """A batch with workflow steps: the settlements and the release of the dependents
    of the steps they ended, in one transaction (a savepoint in the caller's), so a
    join fires with the guarded write that decides it or not at all. Only the steps
    the guard let through release anything; one settled back to pending releases
    nothing."""
    d = sql.dialect()
    with transaction.atomic(using=sql.alias()):
        rows = settle_rows(settlements, now, held=True)
        applied = d.apply_settlements(rows, TALLY)
        steps = [s.job_id for s in settlements if s.step and s.job_id in applied]
        joins.release(steps, now=now)
    return outcome(settlements, applied)


def settle_rows(settlements: Sequence[Settlement], now: datetime, *, held: bool) -> list[SettleRow]:
    """The rows a batch applies: one per job (see ``unique``); ``held``: written inside
    the caller's transaction (see ``shard_of``)."""
    shards: dict[str, int] = {}  # per worker: one thread writes the batch (``shard_of``)
    return [settle_row(s, now, held=held, shards=shards) for s in unique(settlements)]


def settle_row(
    s: Settlement, now: datetime, *, held: bool, shards: dict[str, int] | None = None
) -> SettleRow:
    """The one mapping of a settlement to the row every dialect applies; ``shards``: the
    batch's tally shard per worker, found once (a hash of the worker and thread)."""
    shard = None if shards is None else shards.get(s.worker)
    if shard is None:
        shard = shard_of(s.worker, held=held)
        if shards is not None:
            shards[s.worker] = shard
    instead = on_cancel_request(s)
    micros = None if s.duration is None else duration_microseconds(s.duration)
    logs = s.logs
    return SettleRow(
        id=s.job_id,
        run_no=s.run_no,
        kind=s.kind,
        status=s.status,
        outcome=s.outcome,
        visible_at=s.visible_at,
        failed=1 if s.failed else 0,
        carry=s.carry,
        result=s.result,
        note=s.note.strip(),
        attachment=s.attachment,
        started_at=s.started_at,
        micros=micros,
        worker=s.worker,
        recorded_at=now,
        claimed=Status.CLAIMED,
        c_status=None if instead is None else instead.status,
        c_outcome=None if instead is None else instead.outcome,
        c_note=None if instead is None else instead.note,
        shard=shard,
        bucket=bucket_of(micros),
        logs=None if logs is None else list(logs.lines),
        dropped=0 if logs is None else logs.dropped,
        logs_from=0 if logs is None else s.run_no - conf.get().run_logs_runs + 1,
    )


def settle_statement(
    settlements: Sequence[Settlement], *, now: datetime | None = None
) -> tuple[str, list[Any]]:
    """The statement ``apply(settlements)`` finds and updates the rows with, for EXPLAIN
    (on MySQL/MariaDB, the SELECT that locks them)."""
    d = sql.dialect()
    rows = settle_rows(settlements, now or timezone.now(), held=False)
    return d.settle_statement(rows, TALLY).statement()


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
    d = sql.dialect()
    total = 0
    while True:
        now_ = now or timezone.now()
        # The usual answer is none, found without opening a transaction.
        if not d.run(_ANY_EXPIRED, [d.dt(now_)]):
            return total
        found = _recover(
            Fragment(_EXPIRED, [d.dt(now_), batch_size]),
            policy_for=policy_for,
            now=now_,
            why=lambda claimed_by, expired: (
                f"lease expired at {d.read_dt(expired):%Y-%m-%d %H:%M:%S%z} "
                f"(worker {claimed_by} gone)"
            ),
        )
        total += found
        if found < batch_size:
            return total


def recover_lost(
    *,
    worker_id: str,
    cause: str,
    policy_for: Callable[[str], Policy] | None = None,
    now: datetime | None = None,
) -> int:
    """Return the jobs a worker known to be dead still holds to pending now, without
    waiting out their leases: its supervisor saw it die (``cause`` says how, e.g.
    "killed by SIGKILL"). The same guarded settlement as a stale recovery (journalled
    ``stale-recovered``, a failure counted), so a run that somehow still settles is
    refused. Rows locked by a transaction still open are left to their lease."""
    return _recover(
        Fragment(_HELD_BY, [worker_id]),
        policy_for=policy_for,
        now=now or timezone.now(),
        why=lambda claimed_by, expired: f"worker {claimed_by} {cause}: recovered at once",
    )


def _recover(
    select: Fragment,
    *,
    policy_for: Callable[[str], Policy] | None,
    now: datetime,
    why: Callable[[str, Any], str],
) -> int:
    """Settle the claimed rows ``select`` reads (locking them, skipping locked ones) as
    runs their lost worker failed: ``why(claimed_by, claim_expires_at)`` is each note."""
    policy_of = policy_for or (lambda kind: conf.get().policy())
    d = sql.dialect()
    with transaction.atomic(using=sql.alias()):
        rows = d.run(*d.skipping_locked(select).statement())
        settlements = [
            failure(
                Run(
                    job_id=d.read_uuid(job_id),
                    kind=kind,
                    run_no=run_no,
                    worker=claimed_by,
                    step=workflow_id is not None,
                ),
                failure_count=failure_count,
                policy=policy_of(kind),
                now=now,
                note=why(claimed_by, expired),
                outcome=Outcome.STALE_RECOVERED,
            )
            for job_id, kind, claimed_by, expired, run_no, failure_count, workflow_id in rows
        ]
        apply(settlements, now=now)
    for s in settlements:
        logger.info("recovered job=%s kind=%s outcome=%s", s.job_id, s.kind, s.outcome)
    return len(rows)


_COLUMNS = "SELECT id, kind, claimed_by, claim_expires_at, run_count, failure_count, workflow_id"
# Expired leases, oldest first, by the partial lease index.
_ANY_EXPIRED = f"SELECT 1 FROM {sql.JOB} WHERE status = 'claimed' AND claim_expires_at < %s LIMIT 1"
_EXPIRED = (
    f"{_COLUMNS} FROM {sql.JOB}"
    " WHERE status = 'claimed' AND claim_expires_at < %s ORDER BY claim_expires_at LIMIT %s"
)
# The claims one worker holds (the claimed rows, by the partial lease index).
_HELD_BY = f"{_COLUMNS} FROM {sql.JOB} WHERE status = 'claimed' AND claimed_by = %s"


def _held(worker_id: str, runs: Mapping[uuid.UUID, int]) -> Any:
    """The rows of these runs that are still theirs: claimed, by ``worker_id``, in the
    run numbered (the run's epoch) as given. A run that lost its claim matches none."""
    guard = Q()
    for job_id, run_no in runs.items():
        guard |= Q(id=job_id, run_count=run_no)
    return sql.jobs().filter(guard, status=Status.CLAIMED, claimed_by=worker_id)


def extend_leases(*, worker_id: str, runs: Mapping[uuid.UUID, int], until: datetime) -> int:
    """Push the lease of this worker's running jobs to ``until`` (guarded by run number)."""
    if not runs:
        return 0
    return int(_held(worker_id, runs).update(claim_expires_at=until))


def write_progress(
    *,
    worker_id: str,
    runs: Mapping[uuid.UUID, int],
    progress: Mapping[uuid.UUID, Progress | None],
) -> int:
    """Write the live progress runs reported (None clears it), one statement for all of
    them, each row only while its run still holds it (``_held``): a stale run's write
    changes nothing. Not a settlement: it takes no journal entry and no lock but the
    rows' own, for the moment of this one statement. Returns how many rows it wrote."""
    mine = {job_id: run_no for job_id, run_no in runs.items() if job_id in progress}
    if not mine:
        return 0
    written = int(_held(worker_id, mine).update(**_progress_changes(progress)))
    if written:  # the live pages' cue (a no-op where nothing listens)
        wakeups.announce_progress(mine)
    return written


def _progress_changes(progress: Mapping[uuid.UUID, Progress | None]) -> dict[str, Any]:
    """The progress columns as CASE expressions by job id (a job not named keeps its own)."""

    def case(column: str, value: Callable[[Progress | None], Any], output: Field[Any, Any]) -> Case:
        return Case(
            *(
                When(id=job_id, then=Value(value(p), output_field=output))
                for job_id, p in progress.items()
            ),
            default=F(column),
            output_field=output,
        )

    return {
        "progress_done": case("progress_done", lambda p: p and p.done, FloatField()),
        "progress_total": case("progress_total", lambda p: p and p.total, FloatField()),
        "progress_note": case("progress_note", lambda p: p.note if p else "", CharField()),
    }


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
    statement = next_wakeup_statement(kinds=kinds, queues=queues, now=now or timezone.now())
    *firsts, expiry = d.run(*statement.statement())[0]
    times = [t for t in (d.read_dt(f) for f in firsts) if t is not None]
    return min(times, default=None), d.read_dt(expiry)


def next_wakeup_statement(
    *, kinds: Sequence[str], queues: Sequence[str] | None, now: datetime
) -> Fragment:
    """``next_wakeup``'s query: the first scheduled job of each priority, by the claim
    index (``sql.PRIORITIES``; none without kinds), and the earliest lease expiry."""
    d = sql.dialect()
    firsts: list[Fragment] = []
    if kinds:
        rest = Fragment(*d.in_list("kind", kinds))
        if queues:
            rest = Fragment.concat(rest, " AND ", Fragment(*d.in_list("queue", queues)))
        firsts = [
            Fragment.concat(
                Fragment(
                    f"(SELECT visible_at FROM {sql.JOB} WHERE status = 'pending'"
                    " AND priority = %s AND visible_at > %s AND ",
                    [p, d.dt(now)],
                ),
                rest,
                " ORDER BY visible_at LIMIT 1), ",
            )
            for p in sql.PRIORITIES
        ]
    return Fragment.concat(
        "SELECT ",
        *firsts,
        f"(SELECT min(claim_expires_at) FROM {sql.JOB} WHERE status = 'claimed')",
    )
