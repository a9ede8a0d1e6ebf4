"""Every read and write the queue makes.

The only module that queries Job/JournalEntry/WorkerHeartbeat for queue mechanics:
the worker, the admin, the commands and the public API all come through here.
Functions take keyword-only arguments and keep each transaction short; every state
change writes its journal entry in the same transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Count, F, Field, Min, Q, QuerySet
from django.utils import timezone

from . import conf, notify
from .errors import InvalidTransition, JobNotFound, MergeError
from .executor import failure_settlement
from .handle import JobHandle, Pending
from .models import ACTIVE, TERMINAL, Job, JournalEntry, Outcome, Status, WorkerHeartbeat
from .outcomes import Merge, Settlement
from .task import EnqueueRequest, Task, policy_for, registry

logger = logging.getLogger("django_jobqueue")


def _alias() -> str:
    return conf.get().database


def _jobs() -> QuerySet[Job]:
    return Job.objects.using(_alias())


def _lockable(qs: QuerySet[Job], *, skip_locked: bool) -> QuerySet[Job]:
    """Row locks where the database has them (SQLite serialises writers instead)."""
    features = connections[_alias()].features
    if not features.has_select_for_update:
        return qs
    if skip_locked and features.has_select_for_update_skip_locked:
        return qs.select_for_update(skip_locked=True)
    return qs.select_for_update()


# --- enqueue ------------------------------------------------------------------------------


def enqueue(request: EnqueueRequest) -> JobHandle:
    """Write a job in the caller's transaction (or its own); NOTIFY is delivered on commit."""
    alias = _alias()
    now = timezone.now()
    if request.run_at is not None:
        visible_at = request.run_at
    else:
        visible_at = now + (request.delay or timedelta(0))
    if request.idempotency_key is not None:
        existing = _active_by_key(request.idempotency_key)
        if existing is not None:
            return JobHandle(existing, "reused")
    if request.dedup_key is not None and request.task is not None:
        try:
            merged = _merge(request, visible_at=visible_at, now=now)
        except IntegrityError:
            # A concurrent enqueue took the idempotency key first: reuse its job.
            existing = _active_by_key(request.idempotency_key or "")
            if existing is None:
                raise
            return JobHandle(existing, "reused")
        if merged is not None:
            return merged
    job = Job(
        kind=request.kind,
        queue=request.queue,
        payload=request.payload,
        priority=request.priority,
        created_at=now,
        visible_at=visible_at,
        dedup_key=request.dedup_key,
        idempotency_key=request.idempotency_key,
    )
    if request.idempotency_key is not None:
        try:
            with transaction.atomic(using=alias):
                job.save(force_insert=True, using=alias)
                notify.notify(alias, job.queue)
        except IntegrityError:
            # A concurrent enqueue with the same key won the unique index: reuse its job.
            existing = _active_by_key(request.idempotency_key)
            if existing is None:
                raise
            return JobHandle(existing, "reused")
    else:
        with transaction.atomic(using=alias, savepoint=False):
            job.save(force_insert=True, using=alias)
            notify.notify(alias, job.queue)
    return JobHandle(job, "inserted")


def _active_by_key(key: str) -> Job | None:
    return _jobs().filter(idempotency_key=key, status__in=ACTIVE).first()


def merge_candidates(*, kind: str, dedup_key: str) -> QuerySet[Job]:
    """Pending jobs an incoming task of ``kind`` and ``dedup_key`` may merge into, oldest
    first (served by the ``jobqueue_job_dedup`` partial index)."""
    return (
        _jobs()
        .filter(status=Status.PENDING, kind=kind, dedup_key=dedup_key)
        .order_by("created_at", "id")
    )


def _merge(request: EnqueueRequest, *, visible_at: datetime, now: datetime) -> JobHandle | None:
    """Merge into the oldest pending job of the same kind and dedup key, if the task says so.

    Returns None when there is no candidate, the task chose ``independent``, or the
    candidate stopped being pending in between: the caller then inserts.
    """
    alias = _alias()
    assert request.task is not None
    assert request.dedup_key is not None
    with transaction.atomic(using=alias):
        # Waits for (rather than skips) a row another enqueue is merging into, so two
        # merges of one key are applied one after the other and neither payload is lost.
        candidate = _lockable(
            merge_candidates(kind=request.kind, dedup_key=request.dedup_key), skip_locked=False
        ).first()
        if candidate is None:
            return None
        key = request.idempotency_key
        if key is not None and candidate.idempotency_key not in (None, key):
            return None  # it answers to another key: this request gets its own job
        defn = registry.get(request.kind)
        try:
            existing_task = defn.instance(candidate.payload)
        except Exception as exc:
            raise MergeError(
                f"{request.kind}: pending job {candidate.id} has a payload the task no longer "
                f"accepts ({exc})",
                kind=request.kind,
                job_id=candidate.id,
            ) from exc
        assert existing_task is not None
        pending = Pending(
            job_id=candidate.id,
            task=existing_task,
            carry=dict(candidate.carry or {}),
            run_count=candidate.run_count,
            priority=candidate.priority,
            journal=journal(job_id=candidate.id),
        )
        try:
            decision = request.task.merge(pending)
        except Exception as exc:
            raise MergeError(
                f"{request.kind}.merge() raised {type(exc).__name__}: {exc}", kind=request.kind
            ) from exc
        if not isinstance(decision, Merge):
            raise MergeError(
                f"{request.kind}.merge() must return a Merge decision, got {decision!r}",
                kind=request.kind,
            )
        if decision.action == "independent":
            return None
        changes: dict[str, Any] = {}
        attachment: dict[str, Any] = {"incoming": request.payload}
        if decision.action in ("replace", "with"):
            if decision.action == "replace":
                changes["payload"] = request.payload
                changes["carry"] = {}
            else:
                task = decision.task
                if not isinstance(task, Task) or task.kind != request.kind:
                    raise MergeError(
                        f"{request.kind}: Merge.with_() needs a {request.kind} task, got {task!r}",
                        kind=request.kind,
                    )
                changes["payload"] = task.to_payload()
                if decision.carry is not None:
                    from .task import check_json

                    check_json("carry", decision.carry, kind=request.kind)
                    changes["carry"] = decision.carry
            changes["priority"] = min(candidate.priority, request.priority)
            changes["visible_at"] = min(candidate.visible_at, visible_at)
        if key is not None and candidate.idempotency_key is None:
            # The surviving job now answers to the key, so a retried request is reused.
            changes["idempotency_key"] = key
        updated = (
            _jobs().filter(id=candidate.id, status=Status.PENDING).update(**changes)
            if changes
            else _jobs().filter(id=candidate.id, status=Status.PENDING).count()
        )
        if not updated:
            return None
        JournalEntry.objects.using(alias).create(
            job_id=candidate.id,
            kind=candidate.kind,
            run_no=candidate.run_count,
            outcome=Outcome.MERGED,
            recorded_at=now,
            note=f"merge: {decision.action}",
            attachment=attachment,
        )
        for name, value in changes.items():
            setattr(candidate, name, value)
        if changes:
            notify.notify(alias, candidate.queue)
    return JobHandle(candidate, "merged")


# --- claim, settle, recover, extend -------------------------------------------------------


def claimable(
    *,
    kinds: Sequence[str],
    queues: Sequence[str] | None = None,
    floor: int = 0,
    now: datetime | None = None,
) -> QuerySet[Job]:
    """Runnable jobs in claim order: the query that ``claim_jobs`` locks rows from."""
    qs = _jobs().filter(
        status=Status.PENDING, visible_at__lte=now or timezone.now(), kind__in=list(kinds)
    )
    if queues:
        qs = qs.filter(queue__in=list(queues))
    if floor:
        qs = qs.filter(priority__gte=floor)
    return qs.order_by("priority", "visible_at", "id")


def claim_jobs(
    *,
    worker_id: str,
    limit: int,
    kinds: Sequence[str],
    queues: Sequence[str] | None = None,
    exclude_kinds: Iterable[str] = (),
    kind_limits: Mapping[str, int] | None = None,
    floor: int = 0,
    now: datetime | None = None,
) -> list[Job]:
    """Claim up to ``limit`` runnable jobs in one short transaction.

    Order is priority, then the time each became runnable, then id: exactly the
    ``jobqueue_job_claim`` partial index. ``floor`` restricts to priority >= floor
    (the worker lowers it on a cadence so low tiers are never starved);
    ``kind_limits`` caps how many of a kind this call may take.
    """
    if limit <= 0 or not kinds:
        return []
    alias = _alias()
    now = now or timezone.now()
    excluded = set(exclude_kinds)
    wanted = [k for k in kinds if k not in excluded]
    if not wanted:
        return []
    # With per-kind caps, look a little further so a capped kind at the head does not
    # leave the rest of the slots empty; once a kind's cap is used up, look again
    # without it (a few rounds at most, all in this one transaction).
    fetch = limit * 4 if kind_limits else limit
    chosen: list[Job] = []
    with transaction.atomic(using=alias):
        taken: dict[str, int] = defaultdict(int)
        for _ in range(3):
            qs = claimable(kinds=wanted, queues=queues, floor=floor, now=now)
            if chosen:
                qs = qs.exclude(id__in=[job.id for job in chosen])
            rows = list(_lockable(qs, skip_locked=True)[:fetch])
            for job in rows:
                if kind_limits and taken[job.kind] >= kind_limits.get(job.kind, limit):
                    continue
                taken[job.kind] += 1
                chosen.append(job)
                if len(chosen) == limit:
                    break
            if len(chosen) == limit or len(rows) < fetch or not kind_limits:
                break
            full = {k for k, n in kind_limits.items() if taken[k] >= n}
            wanted = [k for k in wanted if k not in full]
            if not wanted:
                break
        if not chosen:
            return []
        by_lease: dict[timedelta, list[uuid.UUID]] = defaultdict(list)
        for job in chosen:
            by_lease[policy_for(job.kind).lease].append(job.id)
        expires: dict[uuid.UUID, datetime] = {}
        for lease, ids in by_lease.items():
            _jobs().filter(id__in=ids, status=Status.PENDING).update(
                status=Status.CLAIMED,
                claimed_by=worker_id,
                claim_expires_at=now + lease,
                run_count=F("run_count") + 1,
            )
            for job_id in ids:
                expires[job_id] = now + lease
    for job in chosen:
        job.status = Status.CLAIMED
        job.claimed_by = worker_id
        job.claim_expires_at = expires[job.id]
        job.run_count += 1
    return chosen


_SETTLE_FIELDS = [
    "status",
    "visible_at",
    "claimed_by",
    "claim_expires_at",
    "failure_count",
    "carry",
    "result",
    "finished_at",
    "cancel_requested",
    "cancel_actor",
]


def settle(*, worker_id: str, settlements: Sequence[Settlement]) -> list[bool]:
    """Apply run endings in one transaction; each only if its claim is still this run's.

    The guard is status = claimed, claimed_by = worker_id and run_count = the run's
    number. A settlement whose guard fails writes nothing (its run was taken over).
    Returns, per settlement, whether it was applied.
    """
    if not settlements:
        return []
    alias = _alias()
    now = timezone.now()
    ids = sorted({s.job_id for s in settlements})
    applied: list[bool] = []
    with transaction.atomic(using=alias):
        rows = {
            job.id: job
            for job in _lockable(_jobs().filter(id__in=ids), skip_locked=False)
            .only(*_GUARD_FIELDS)
            .order_by("id")
        }
        changed: list[tuple[Job, dict[str, Any] | None]] = []
        entries: list[JournalEntry] = []
        for s in settlements:
            job = rows.get(s.job_id)
            if (
                job is None
                or job.status != Status.CLAIMED
                or job.claimed_by != worker_id
                or job.run_count != s.run_no
            ):
                logger.info(
                    "dropped settlement job=%s kind=%s run=%s outcome=%s: claim no longer ours",
                    s.job_id,
                    s.kind,
                    s.run_no,
                    s.outcome,
                )
                applied.append(False)
                continue
            outcome, status, note = s.outcome, s.status, s.note
            if job.cancel_requested and status == Status.PENDING:
                outcome, status = Outcome.CANCELLED, Status.CANCELLED
                note = (
                    f"cancelled on request{_by(job.cancel_actor)} (run ended: {s.outcome})\n{note}"
                )
            _apply(job, status=status, visible_at=s.visible_at, now=now)
            if s.failed:
                job.failure_count += 1
            if status == Status.COMPLETED:
                job.result = s.result
            changed.append((job, s.carry))
            entries.append(
                JournalEntry(
                    job_id=job.id,
                    kind=job.kind,
                    run_no=s.run_no,
                    outcome=outcome,
                    started_at=s.started_at,
                    recorded_at=now,
                    duration=s.duration,
                    note=note.strip(),
                    attachment=s.attachment,
                    worker=worker_id,
                    actor=job.cancel_actor if outcome == Outcome.CANCELLED else "",
                )
            )
            applied.append(True)
        if changed:
            _write_settled(changed)
            JournalEntry.objects.using(alias).bulk_create(entries)
    return applied


# What settle and recovery read of a row: enough for the guard and the next state.
_GUARD_FIELDS = (
    "id",
    "kind",
    "status",
    "claimed_by",
    "claim_expires_at",
    "run_count",
    "failure_count",
    "cancel_requested",
    "cancel_actor",
)


def _write_settled(changed: Sequence[tuple[Job, dict[str, Any] | None]]) -> None:
    """Write settled rows with one prepared UPDATE run for every row.

    ``bulk_update`` builds a CASE per field and row, which costs more than the rest of
    a settlement together. A NULL carry keeps the stored one; visible_at is only set
    for rows going back to pending; result is set only by a completing run.
    """
    conn = connections[_alias()]
    meta = Job._meta
    q = conn.ops.quote_name

    def prep(name: str, value: Any) -> Any:
        field = meta.get_field(name)
        assert isinstance(field, Field)
        return field.get_db_prep_save(value, conn)

    # Names come from the model, values are bound: nothing here is user text.
    sql = (
        f"UPDATE {q(meta.db_table)} SET {q('status')} = %s,"  # noqa: S608
        f" {q('visible_at')} = COALESCE(%s, {q('visible_at')}),"
        f" {q('claimed_by')} = '', {q('claim_expires_at')} = NULL, {q('failure_count')} = %s,"
        f" {q('carry')} = COALESCE(%s, {q('carry')}), {q('result')} = %s,"
        f" {q('finished_at')} = %s, {q('cancel_requested')} = %s, {q('cancel_actor')} = %s"
        f" WHERE {q('id')} = %s"
    )
    params = [
        (
            job.status,
            prep("visible_at", job.visible_at if job.status == Status.PENDING else None),
            job.failure_count,
            None if carry is None else prep("carry", carry),
            prep("result", job.__dict__.get("result")),
            prep("finished_at", job.finished_at),
            job.cancel_requested,
            job.cancel_actor,
            prep("id", job.id),
        )
        for job, carry in changed
    ]
    with conn.cursor() as cursor:
        cursor.executemany(sql, params)


def _by(actor: str) -> str:
    return f" by {actor}" if actor else ""


def _apply(job: Job, *, status: str, visible_at: datetime | None, now: datetime) -> None:
    """Move a row to ``status``, clearing the claim fields."""
    job.status = status
    job.claimed_by = ""
    job.claim_expires_at = None
    if status == Status.PENDING:
        job.visible_at = visible_at or now
        job.finished_at = None
    else:
        job.finished_at = now
        job.cancel_requested = False


def release_settlement(job: Job, *, note: str = "worker shut down") -> Settlement:
    """A graceful hand-back: pending now, no failure counted, carry as last settled."""
    return Settlement(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count,
        outcome=Outcome.RELEASED,
        status=Status.PENDING,
        visible_at=timezone.now(),
        note=note,
    )


def recover_expired(*, now: datetime | None = None, batch_size: int = 500) -> int:
    """Return jobs whose lease ran out (their worker died) to pending, counting a failure.

    Works in batches of ``batch_size`` (skip-locked, so workers recovering at once
    share the work) until a batch comes back short. Returns how many were recovered.
    """
    alias = _alias()
    total = 0
    while True:
        now_ = now or timezone.now()
        with transaction.atomic(using=alias):
            rows = list(
                _lockable(
                    _jobs().filter(status=Status.CLAIMED, claim_expires_at__lt=now_),
                    skip_locked=True,
                )
                .only(*_GUARD_FIELDS)
                .order_by("claim_expires_at")[:batch_size]
            )
            if not rows:
                return total
            entries = []
            for job in rows:
                note = (
                    f"lease expired at {job.claim_expires_at:%Y-%m-%d %H:%M:%S%z} "
                    f"(worker {job.claimed_by} gone)"
                )
                common = {
                    "job_id": job.id,
                    "kind": job.kind,
                    "run_no": job.run_count,
                }
                s = failure_settlement(
                    job,
                    policy=policy_for(job.kind),
                    now=now_,
                    note=note,
                    carry=None,
                    common=common,
                    retried_outcome=Outcome.STALE_RECOVERED,
                )
                outcome, status = s.outcome, s.status
                if job.cancel_requested:
                    outcome, status = Outcome.CANCELLED, Status.CANCELLED
                entries.append(
                    JournalEntry(
                        job_id=job.id,
                        kind=job.kind,
                        run_no=job.run_count,
                        outcome=outcome,
                        recorded_at=now_,
                        note=s.note,
                        worker=job.claimed_by,
                        actor=job.cancel_actor if status == Status.CANCELLED else "",
                    )
                )
                _apply(job, status=status, visible_at=s.visible_at, now=now_)
                job.failure_count += 1
            _write_settled([(job, None) for job in rows])
            JournalEntry.objects.using(alias).bulk_create(entries)
        total += len(rows)
        for entry in entries:
            logger.info(
                "recovered job=%s kind=%s outcome=%s", entry.job_id, entry.kind, entry.outcome
            )
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
        _jobs()
        .filter(guard, status=Status.CLAIMED, claimed_by=worker_id)
        .update(claim_expires_at=until)
    )


def cancel_requested(*, job_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these running jobs an operator asked to cancel."""
    ids = list(job_ids)
    if not ids:
        return set()
    return set(_jobs().filter(id__in=ids, cancel_requested=True).values_list("id", flat=True))


def next_visible_at(
    *, kinds: Sequence[str], queues: Sequence[str] | None = None, after: datetime | None = None
) -> datetime | None:
    """When the next scheduled (delayed, backed-off, paused) job becomes runnable."""
    if not kinds:
        return None
    qs = _jobs().filter(
        status=Status.PENDING, visible_at__gt=after or timezone.now(), kind__in=list(kinds)
    )
    if queues:
        qs = qs.filter(queue__in=list(queues))
    result: datetime | None = qs.aggregate(at=Min("visible_at"))["at"]
    return result


def next_lease_expiry() -> datetime | None:
    """When the earliest running job's lease runs out (the next stale-recovery chance)."""
    result: datetime | None = (
        _jobs().filter(status=Status.CLAIMED).aggregate(at=Min("claim_expires_at"))["at"]
    )
    return result


# --- reading jobs -------------------------------------------------------------------------


def get_job(*, job_id: uuid.UUID | str) -> Job:
    try:
        return _jobs().get(id=_uuid(job_id))
    except Job.DoesNotExist:
        raise JobNotFound(f"No job with id {job_id}", job_id=job_id) from None


def journal(*, job_id: uuid.UUID | str) -> list[JournalEntry]:
    """A job's journal, oldest first."""
    return list(JournalEntry.objects.using(_alias()).filter(job_id=_uuid(job_id)).order_by("id"))


def _uuid(value: uuid.UUID | str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise JobNotFound(f"{value!r} is not a job id (expected a UUID)", job_id=value) from None


# --- operator actions ---------------------------------------------------------------------


def cancel(*, job_id: uuid.UUID | str, actor: str = "") -> Job:
    """Cancel a pending job now, or ask a claimed job's worker to stop it.

    A claimed job settles as ``cancelled`` when its run ends (unless it completed).
    Cancelling a cancelled job is a no-op; completed and dead jobs cannot be cancelled.
    """
    alias = _alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = _locked(job_id)
        if job.status == Status.PENDING:
            _apply(job, status=Status.CANCELLED, visible_at=None, now=now)
            job.save(using=alias, update_fields=_SETTLE_FIELDS)
            _operator_entry(job, Outcome.CANCELLED, actor, "cancelled while pending", now)
        elif job.status == Status.CLAIMED:
            if not job.cancel_requested:
                job.cancel_requested = True
                job.cancel_actor = actor
                job.save(using=alias, update_fields=["cancel_requested", "cancel_actor"])
        elif job.status != Status.CANCELLED:
            raise InvalidTransition(
                f"Job {job.id} is {job.status}; only pending or claimed jobs can be cancelled",
                job_id=job.id,
                status=job.status,
            )
    return job


def requeue(*, job_id: uuid.UUID | str, force: bool = False, actor: str = "") -> Job:
    """Return a dead or cancelled job (a completed one with ``force``) to pending, now.

    The failure count is reset and the carry kept.
    """
    alias = _alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        job = _locked(job_id)
        if job.status in ACTIVE:
            raise InvalidTransition(
                f"Job {job.id} is {job.status}; only finished jobs can be requeued",
                job_id=job.id,
                status=job.status,
            )
        if job.status == Status.COMPLETED and not force:
            raise InvalidTransition(
                f"Job {job.id} completed; requeue it with force to run it again",
                job_id=job.id,
                status=job.status,
            )
        previous = job.status
        _apply(job, status=Status.PENDING, visible_at=now, now=now)
        job.failure_count = 0
        job.cancel_requested = False
        job.cancel_actor = ""
        job.result = None
        try:
            with transaction.atomic(using=alias):
                job.save(using=alias, update_fields=_SETTLE_FIELDS)
        except IntegrityError as exc:
            raise InvalidTransition(
                f"Job {job.id} cannot be requeued: another active job holds its idempotency "
                f"key {job.idempotency_key!r}",
                job_id=job.id,
            ) from exc
        _operator_entry(job, Outcome.REQUEUED, actor, f"requeued from {previous}", now)
        notify.notify(alias, job.queue)
    return job


def _locked(job_id: uuid.UUID | str) -> Job:
    try:
        return _lockable(_jobs().filter(id=_uuid(job_id)), skip_locked=False).get()
    except Job.DoesNotExist:
        raise JobNotFound(f"No job with id {job_id}", job_id=job_id) from None


def _operator_entry(job: Job, outcome: str, actor: str, note: str, now: datetime) -> None:
    JournalEntry.objects.using(_alias()).create(
        job_id=job.id,
        kind=job.kind,
        run_no=job.run_count,
        outcome=outcome,
        recorded_at=now,
        note=f"{note}{_by(actor)}",
        actor=actor,
    )


# --- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """One page of history; pass ``next_cursor`` back as ``after`` for the next one."""

    jobs: list[Job]
    next_cursor: str | None


def _encode_cursor(job: Job) -> str:
    return f"{job.created_at.isoformat()}|{job.id}"


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        stamp, raw_id = cursor.split("|", 1)
        at, last_id = datetime.fromisoformat(stamp), uuid.UUID(raw_id)
    except ValueError:
        raise ValueError(f"Invalid history cursor {cursor!r}") from None
    if django_settings.USE_TZ and timezone.is_naive(at):
        raise ValueError(f"Invalid history cursor {cursor!r}: its time has no timezone")
    return at, last_id


def history(
    *,
    kind: str | Sequence[str] | None = None,
    queue: str | None = None,
    status: str | Sequence[str] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    finished_after: datetime | None = None,
    finished_before: datetime | None = None,
    after: str | None = None,
    limit: int = 100,
    newest_first: bool = False,
) -> Page:
    """Jobs matching the filters, a keyset page on (created_at, id).

    Pages stay stable while rows are inserted and deleted between requests: each page
    starts strictly after the last row of the previous one.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    qs = _jobs()
    if kind:
        qs = qs.filter(kind__in=[kind] if isinstance(kind, str) else list(kind))
    if queue:
        qs = qs.filter(queue=queue)
    if status:
        statuses = [status] if isinstance(status, str) else list(status)
        unknown = sorted(set(statuses) - set(Status.values))
        if unknown:
            raise ValueError(
                f"Unknown status {', '.join(unknown)}; known: {', '.join(Status.values)}"
            )
        qs = qs.filter(status__in=statuses)
    if created_after:
        qs = qs.filter(created_at__gte=created_after)
    if created_before:
        qs = qs.filter(created_at__lt=created_before)
    if finished_after:
        qs = qs.filter(finished_at__gte=finished_after)
    if finished_before:
        qs = qs.filter(finished_at__lt=finished_before)
    if after:
        stamp, last_id = _decode_cursor(after)
        if newest_first:
            qs = qs.filter(Q(created_at__lt=stamp) | Q(created_at=stamp, id__lt=last_id))
        else:
            qs = qs.filter(Q(created_at__gt=stamp) | Q(created_at=stamp, id__gt=last_id))
    order = ("-created_at", "-id") if newest_first else ("created_at", "id")
    rows = list(qs.order_by(*order)[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(jobs=rows, next_cursor=_encode_cursor(rows[-1]) if more and rows else None)


# --- cleanup ------------------------------------------------------------------------------


def cleanup(
    *,
    finished_before: datetime,
    kind: str | None = None,
    status: str | Sequence[str] | None = None,
    batch_size: int = 1000,
    dry_run: bool = False,
) -> int:
    """Delete finished jobs (and their journal) in batches, each its own short transaction.

    Only completed, dead and cancelled jobs are ever deleted. Returns the count (with
    ``dry_run``, the count that would be deleted).
    """
    statuses = [status] if isinstance(status, str) else list(status or TERMINAL)
    bad = sorted(set(statuses) - set(TERMINAL))
    if bad:
        raise ValueError(
            f"cleanup deletes only finished jobs ({', '.join(TERMINAL)}), not {', '.join(bad)}"
        )
    qs = _jobs().filter(status__in=statuses, finished_at__lt=finished_before)
    if kind:
        qs = qs.filter(kind=kind)
    if dry_run:
        return qs.count()
    alias = _alias()
    total = 0
    while True:
        with transaction.atomic(using=alias):
            ids = list(
                _lockable(qs.order_by("finished_at"), skip_locked=True).values_list(
                    "id", flat=True
                )[:batch_size]
            )
            if not ids:
                break
            JournalEntry.objects.using(alias).filter(job_id__in=ids).delete()
            _, per_model = Job.objects.using(alias).filter(id__in=ids, status__in=statuses).delete()
        total += per_model.get(Job._meta.label, 0)
        if len(ids) < batch_size:
            break
    return total


# --- workers ------------------------------------------------------------------------------


def register_worker(
    *,
    worker_id: str,
    host: str,
    pid: int,
    queues: Sequence[str],
    kinds: Sequence[str],
    concurrency: int,
) -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.using(_alias()).update_or_create(
        id=worker_id,
        defaults={
            "host": host,
            "pid": pid,
            "queues": list(queues),
            "kinds": list(kinds),
            "concurrency": concurrency,
            "started_at": now,
            "last_seen_at": now,
            "jobs_done": 0,
            "stopped_at": None,
        },
    )


def beat(*, worker_id: str, jobs_done: int, stopped: bool = False) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {"last_seen_at": now, "jobs_done": jobs_done}
    if stopped:
        fields["stopped_at"] = now
    WorkerHeartbeat.objects.using(_alias()).filter(id=worker_id).update(**fields)


# --- stats --------------------------------------------------------------------------------

WORKER_GONE_AFTER = timedelta(seconds=60)


def stats(
    *, window: timedelta = timedelta(hours=24), now: datetime | None = None
) -> dict[str, Any]:
    """A snapshot of the queue: backlog, claims, failures, workers and recent run statistics."""
    now = now or timezone.now()
    jobs = _jobs()
    runnable = jobs.filter(status=Status.PENDING, visible_at__lte=now)
    pending_by = [
        {"kind": row["kind"], "queue": row["queue"], "count": row["n"]}
        for row in runnable.values("kind", "queue")
        .annotate(n=Count("id"))
        .order_by("kind", "queue")
    ]
    oldest = {
        row["kind"]: (now - row["oldest"]).total_seconds()
        for row in runnable.values("kind").annotate(oldest=Min("visible_at")).order_by("kind")
    }
    dead_by = {
        row["kind"]: row["n"]
        for row in jobs.filter(status=Status.DEAD)
        .values("kind")
        .annotate(n=Count("id"))
        .order_by("kind")
    }
    workers = []
    live: list[WorkerHeartbeat] = []
    for w in WorkerHeartbeat.objects.using(_alias()).order_by("-last_seen_at"):
        alive = w.stopped_at is None and now - w.last_seen_at <= WORKER_GONE_AFTER
        if alive:
            live.append(w)
        workers.append(
            {
                "id": w.id,
                "host": w.host,
                "pid": w.pid,
                "queues": w.queues,
                "kinds": w.kinds,
                "concurrency": w.concurrency,
                "started_at": w.started_at,
                "last_seen_at": w.last_seen_at,
                "jobs_done": w.jobs_done,
                "state": "alive" if alive else "gone",
            }
        )
    return {
        "at": now,
        "pending": pending_by,
        "pending_total": sum(row["count"] for row in pending_by),
        "oldest_pending_seconds": oldest,
        "scheduled": jobs.filter(status=Status.PENDING, visible_at__gt=now).count(),
        "claimed": jobs.filter(status=Status.CLAIMED).count(),
        "dead": dead_by,
        # A worker serves a pending row when it runs the kind and reads the row's queue
        # (no queues listed means every queue).
        "unserved_kinds": sorted(
            {
                row["kind"]
                for row in pending_by
                if not any(
                    row["kind"] in w.kinds and (not w.queues or row["queue"] in w.queues)
                    for w in live
                )
            }
        ),
        "unclaimed_kinds": _unclaimed_kinds(set(oldest), now=now),
        "workers": workers,
        "runs": run_stats(since=now - window),
        "window_seconds": window.total_seconds(),
    }


UNCLAIMED_AFTER = timedelta(hours=1)


def _unclaimed_kinds(pending_kinds: set[str], *, now: datetime) -> list[str]:
    """Kinds with runnable jobs that no worker has claimed within ``UNCLAIMED_AFTER``:
    none is running now and no worker settled or lost a run of them since."""
    if not pending_kinds:
        return []
    kinds = sorted(pending_kinds)
    running = set(
        _jobs().filter(status=Status.CLAIMED, kind__in=kinds).values_list("kind", flat=True)
    )
    recent = set(
        JournalEntry.objects.using(_alias())
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


def run_stats(*, since: datetime) -> dict[str, dict[str, Any]]:
    """Per kind, over journal entries recorded since ``since``: runs by outcome, p50/p95
    duration in seconds, and failure rate (failed runs / runs)."""
    entries = JournalEntry.objects.using(_alias()).filter(
        recorded_at__gte=since, outcome__in=_RUN_OUTCOMES
    )
    # An operator's cancel of a pending job is journalled as "cancelled" but no worker ran
    # it (runs, including recovered ones, always name their worker): not a run.
    entries = entries.exclude(outcome=Outcome.CANCELLED, worker="")
    result: dict[str, dict[str, Any]] = {}
    for row in entries.values("kind", "outcome").annotate(n=Count("id")).order_by("kind"):
        kind_stats = result.setdefault(
            row["kind"], {"runs": 0, "outcomes": {}, "p50": None, "p95": None, "failure_rate": 0.0}
        )
        kind_stats["outcomes"][row["outcome"]] = row["n"]
        kind_stats["runs"] += row["n"]
    for kind, kind_stats in result.items():
        failed = sum(kind_stats["outcomes"].get(o, 0) for o in _FAILED_OUTCOMES)
        kind_stats["failure_rate"] = failed / kind_stats["runs"] if kind_stats["runs"] else 0.0
        p50, p95 = _percentiles(entries.filter(kind=kind, duration__isnull=False))
        kind_stats["p50"], kind_stats["p95"] = p50, p95
    return result


def _percentiles(qs: QuerySet[JournalEntry]) -> tuple[float | None, float | None]:
    alias = _alias()
    if connections[alias].vendor == "postgresql":
        sql, params = qs.values("duration").query.sql_with_params()
        with connections[alias].cursor() as cursor:
            seconds = "EXTRACT(EPOCH FROM d.duration)"
            query = (
                f"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY {seconds}),"  # noqa: S608 - Django's own compiled SQL, params bound
                f" percentile_cont(0.95) WITHIN GROUP (ORDER BY {seconds}) FROM ({sql}) AS d"
            )
            cursor.execute(query, params)
            row = cursor.fetchone()
        return (
            float(row[0]) if row and row[0] is not None else None,
            float(row[1]) if row and row[1] is not None else None,
        )
    values = sorted(
        d.total_seconds() for d in qs.values_list("duration", flat=True) if d is not None
    )
    return _pct(values, 0.5), _pct(values, 0.95)


def _pct(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile, as PostgreSQL's percentile_cont."""
    if not values:
        return None
    pos = (len(values) - 1) * q
    low = int(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)
