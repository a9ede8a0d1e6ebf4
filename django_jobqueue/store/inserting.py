"""Writing new jobs: one statement per enqueue, and merge-on-enqueue (many at once:
``bulk``).

An enqueue outside a transaction is a single INSERT in autocommit; inside the
caller's ``transaction.atomic()`` it joins it. On PostgreSQL a statement-level
trigger (migration 0002) sends one NOTIFY per queue per statement (a COPY is one),
delivered on commit, so a bulk insert wakes the workers once.

A request of a rate-limited kind first takes its token from the kind's bucket
(``limits.take_tokens``) in the same transaction as its row: an enqueue over the rate
raises ``RateLimited`` and writes neither; one that rolls back gives its token back.
Counted per request, whatever becomes of it (inserted, merged or reused).
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import IntegrityError, transaction
from django.db.models import UniqueConstraint
from django.utils import timezone

from django_jobqueue import tracing
from django_jobqueue.errors import KeyContended, RateLimited
from django_jobqueue.ids import uuid7
from django_jobqueue.models import ACTIVE, Job, Outcome, Status
from django_jobqueue.rules.lifecycle import later
from django_jobqueue.store import sql, wakeups
from django_jobqueue.store.dialects.base.storage import NewRow
from django_jobqueue.store.limits import take_tokens
from django_jobqueue.store.running import into_running
from django_jobqueue.validation import Rate

Disposition = Literal["inserted", "merged", "reused"]

# Above this many rows a workflow's insert is split, to keep each statement's text and
# the server's memory for it modest (a bulk enqueue's plain jobs go to the dialect all
# at once: PostgreSQL streams them in one COPY, the others split by their own limits).
BULK_BATCH = 5000

# The model's partial unique constraint that lets one active job hold an idempotency key:
# the keyed insert's conflict target and its condition are taken from it, so the
# statement and the index cannot disagree.
IDEMPOTENCY = next(
    c
    for c in Job._meta.constraints
    if isinstance(c, UniqueConstraint) and c.name == "jobqueue_job_idempotency_active"
)


@dataclass(frozen=True)
class MergePlan:
    """What a merge into a pending job changes, as decided by the task layer."""

    action: Literal["keep", "replace", "with"]
    payload: dict[str, Any] | None = None  # replace / with: the job's new payload
    carry: dict[str, Any] | None = None  # None keeps the stored carry


@dataclass(frozen=True)
class EnqueueRequest:
    """A validated job, ready to write.

    ``merge`` is set when the task has a dedup key: given a pending candidate, it
    returns the plan, or None to insert independently (the task layer decides).
    ``payload_json`` is the payload already encoded, when the caller has it.
    """

    kind: str
    payload: dict[str, Any]
    queue: str
    priority: int
    delay: timedelta | None = None
    run_at: datetime | None = None
    idempotency_key: str | None = None
    dedup_key: str | None = None
    merge: Callable[[Job], MergePlan | None] | None = field(default=None, compare=False)
    payload_json: str | None = field(default=None, compare=False)
    rate: Rate | None = None  # the kind's enqueue rate limit (None: none)
    job_key: str | None = None  # the job's key (per-key limits and fairness)
    rate_per_key: Rate | None = None  # the enqueue rate limit of each key (None: none)
    debounce: timedelta | None = None  # a merge pushes the run to this after it...
    max_wait: timedelta | None = None  # ... never past this after the first enqueue
    # "drop": merge into a running sibling when no pending one takes it ("wait": held by
    # the kind's per-key limit of one, the key being the dedup key; None: neither)
    while_running: str | None = None

    def varied(
        self, payload: dict[str, Any], payload_json: str, job_key: str | None
    ) -> EnqueueRequest:
        """This request with another payload and key: a bulk enqueue's items share all
        else. The fields are copied, not passed through the frozen dataclass's
        ``__init__`` again (a fifth of the cost, per item of a bulk)."""
        new = object.__new__(EnqueueRequest)
        new.__dict__.update(self.__dict__, payload=payload, payload_json=payload_json)
        new.__dict__["job_key"] = job_key
        return new

    @property
    def merge_key(self) -> str | None:
        """The dedup key this request merges by: its dedup key when it has a merge too
        (a dedup key alone only names the job; None: it merges into nothing). Such a
        request is written alone, under its key's merge lock."""
        return self.dedup_key if self.merge is not None else None

    def visible_at(self, now: datetime) -> datetime:
        if self.debounce is not None:
            return later(now, self.debounce)
        if self.run_at is not None:
            return self.run_at
        # A delay past any date waits until the latest one instead of overflowing.
        return later(now, self.delay) if self.delay else now


@dataclass(frozen=True, slots=True)
class NewJob:
    """A row a bulk insert wrote: what a handle shows without reading it back."""

    id: uuid.UUID
    kind: str
    status: str = Status.PENDING
    result: Any = None


@dataclass(frozen=True, slots=True)
class WrittenJob:
    """The row one enqueue wrote, every value of it, and the model instance made from
    them only when asked (``model``): Django's model init, which sets and defaults each
    of the row's 34 fields, was half of an enqueue's time in Python."""

    id: uuid.UUID
    kind: str
    queue: str
    payload: dict[str, Any]
    priority: int
    created_at: datetime
    visible_at: datetime
    dedup_key: str | None
    idempotency_key: str | None
    trace_context: str
    key: str | None
    status: str = Status.PENDING
    result: Any = None

    def model(self, database: str) -> Job:
        """The row as a model instance of ``database``'s (saved, as it is): each of this
        class's fields is the model field of its name."""
        job = Job(**{f.name: getattr(self, f.name) for f in fields(self)})
        job._state.adding = False
        job._state.db = database
        return job


def enqueue(request: EnqueueRequest) -> tuple[Job | WrittenJob, Disposition]:
    """Write one job in the caller's transaction (or in autocommit, as one statement).

    A rate-limited kind's token is taken in the same transaction (one of its own in
    autocommit); ``RateLimited`` when there is none, and nothing is written. When an
    application traces, the write is a PRODUCER span whose context the job keeps.
    """
    with tracing.enqueue_span(kind=request.kind, queue=request.queue) as span:
        job, disposition = _limited(request)
        tracing.enqueued(span, job_id=job.id, disposition=disposition)
    return job, disposition


def _limited(request: EnqueueRequest) -> tuple[Job | WrittenJob, Disposition]:
    buckets = _buckets(request)
    if not buckets:
        return write_request(request)
    alias = sql.alias()
    joined = sql.connection().in_atomic_block
    # In the caller's transaction the token joins it (no savepoint: a RateLimited leaves
    # that transaction usable); alone, token and row commit together.
    with contextlib.nullcontext() if joined else transaction.atomic(using=alias):
        for bucket, (rate, key) in sorted(buckets.items()):
            wait = take_tokens(kind=bucket, rate=rate, count=1)
            if wait is not None:
                raise rate_limited(request.kind, rate, 1, wait, key=key)
        return write_request(request)


def key_bucket(kind: str, key: str) -> str:
    """The rate bucket of one key of a kind: a digest, so any kind and key fit its name."""
    return "key:" + hashlib.sha256(f"{kind}\0{key}".encode()).hexdigest()


def _buckets(request: EnqueueRequest) -> dict[str, tuple[Rate, str | None]]:
    """The rate buckets an enqueue takes a token from: the kind's, and its key's."""
    found: dict[str, tuple[Rate, str | None]] = {}
    if request.rate is not None:
        found[request.kind] = (request.rate, None)
    if request.rate_per_key is not None and request.job_key is not None:
        found[key_bucket(request.kind, request.job_key)] = (request.rate_per_key, request.job_key)
    return found


def take_rate_tokens(requests: Sequence[EnqueueRequest], *, each: int = 1) -> None:
    """Take the tokens a batch (``enqueue_many``, a workflow's steps) needs from every
    bucket it draws on, its kinds' and their keys' (``_buckets``, as one enqueue), in
    one order so that two batches cannot deadlock; ``RateLimited`` for the first one
    short, in the batch's transaction, which gives back the tokens taken before. Each
    request counts ``each`` times (a streamed batch's one template for all its jobs)."""
    rated: dict[str, tuple[Rate, int, str, str | None]] = {}
    for request in requests:
        for bucket, (rate, key) in _buckets(request).items():
            _, count, _, _ = rated.get(bucket, (rate, 0, request.kind, key))
            rated[bucket] = (rate, count + each, request.kind, key)
    for bucket in sorted(rated):
        rate, count, kind, key = rated[bucket]
        wait = take_tokens(kind=bucket, rate=rate, count=count)
        if wait is not None:
            raise rate_limited(kind, rate, count, wait, key=key)


def rate_limited(
    kind: str, rate: Rate, count: int, wait: float, *, key: str | None = None
) -> RateLimited:
    """The error for ``count`` enqueues of ``kind`` (of one ``key``, for a per-key rate)
    that ``rate`` did not let through."""
    if key is not None:
        kind = f"{kind} key {key!r}"
    if wait == float("inf"):
        return RateLimited(
            f"{kind}: {count} jobs at once are more than its rate limit {rate} ever lets "
            f"through (at most {rate.count} at once); nothing was enqueued",
            kind=kind,
            rate=str(rate),
            retry_after=None,
        )
    what = "1 job" if count == 1 else f"{count} jobs"
    return RateLimited(
        f"{kind}: rate limit {rate} reached; {what} can be enqueued again in {wait:.2f}s. "
        "Nothing was enqueued",
        kind=kind,
        rate=str(rate),
        retry_after=wait,
    )


def write_request(request: EnqueueRequest) -> tuple[Job | WrittenJob, Disposition]:
    """Write one request whose rate tokens are taken (``enqueue``'s, or one of a bulk's
    keyed or merging requests): reuse its idempotency key's job, merge, or insert."""
    now = timezone.now()
    if request.idempotency_key is not None:
        existing = active_by_key(request.idempotency_key)
        if existing is not None:
            return existing, "reused"
    if request.merge_key is not None:
        joined = sql.connection().in_atomic_block
        # Alone, the key's lock and the job's row commit together (in the caller's
        # transaction they join it, the lock held until it ends).
        with contextlib.nullcontext() if joined else transaction.atomic(using=sql.alias()):
            lock_merges([request])
            return _merge_or_insert(request, now)
    return _insert(request, now)


def merge_lock_name(kind: str, dedup_key: str) -> str:
    """The merge-lock row of a kind's dedup key: a digest, so any kind and key fit it."""
    return hashlib.sha256(f"{kind}\0{dedup_key}".encode()).hexdigest()


def lock_merges(requests: Sequence[EnqueueRequest]) -> None:
    """Lock the merge-lock rows of these requests' (kind, dedup key) in the current
    transaction, in one order (two batches with the same keys cannot wait for each other
    in a circle). Held until it ends: a concurrent enqueue of one of these keys waits,
    then sees the job this one inserted or merged into. Requests with no merge take none."""
    names = {merge_lock_name(r.kind, key) for r in requests if (key := r.merge_key) is not None}
    d = sql.dialect()
    for name in sorted(names):
        d.lock_merge(name)


def _merge_or_insert(
    request: EnqueueRequest, now: datetime
) -> tuple[Job | WrittenJob, Disposition]:
    """Merge into a pending (or, with ``while_running="drop"``, running) job of the same
    kind and dedup key, else insert; the key's merge lock is held."""
    assert request.dedup_key is not None
    try:
        merged = _merge(request, now=now)
    except IntegrityError:
        # A concurrent enqueue took the idempotency key first: reuse its job.
        existing = active_by_key(request.idempotency_key or "")
        if existing is None:
            raise
        return existing, "reused"
    if merged is not None:
        return merged
    if request.while_running == "drop":
        running = into_running(
            kind=request.kind,
            dedup_key=request.dedup_key,
            payload=request.payload,
            idempotency_key=request.idempotency_key,
            now=now,
        )
        if running is not None:
            return running, "merged"
    return _insert(request, now)


def _insert(request: EnqueueRequest, now: datetime) -> tuple[Job | WrittenJob, Disposition]:
    job = _new_row(request, now)
    if request.idempotency_key is None:
        sql.dialect().insert_jobs([_insert_row(job, request)])
        return job, "inserted"
    return _insert_keyed(job, request)


def _insert_keyed(job: WrittenJob, request: EnqueueRequest) -> tuple[Job | WrittenJob, Disposition]:
    """Insert unless another active job holds the idempotency key; then reuse that one
    (the dialect's insert neither raises on the key nor spoils the caller's transaction)."""
    key = request.idempotency_key
    assert key is not None
    d = sql.dialect()
    row = _insert_row(job, request)
    for _ in range(3):
        if d.insert_keyed(row, unique=IDEMPOTENCY):
            return job, "inserted"
        existing = active_by_key(key)
        if existing is not None:
            return existing, "reused"
        # The holder finished between the two statements: the key is free again.
    raise KeyContended(
        f"idempotency key {key!r} kept changing hands; try again", key=key, kind=request.kind
    )


def _new_row(request: EnqueueRequest, now: datetime) -> WrittenJob:
    return WrittenJob(
        id=uuid7(),
        kind=request.kind,
        queue=request.queue,
        payload=request.payload,
        priority=request.priority,
        created_at=now,
        visible_at=request.visible_at(now),
        dedup_key=request.dedup_key,
        idempotency_key=request.idempotency_key,
        trace_context=tracing.capture_context(),
        key=request.job_key,
    )


def _insert_row(job: WrittenJob, request: EnqueueRequest) -> NewRow:
    payload = request.payload_json if request.payload_json is not None else sql.dumps(job.payload)
    return NewRow(
        id=job.id,
        kind=job.kind,
        queue=job.queue,
        payload=payload,
        priority=job.priority,
        created_at=job.created_at,
        visible_at=job.visible_at,
        dedup_key=job.dedup_key,
        idempotency_key=job.idempotency_key,
        trace_context=job.trace_context,
        job_key=job.key,
    )


def active_by_key(key: str) -> Job | None:
    return sql.jobs().filter(idempotency_key=key, status__in=ACTIVE).first()


def merge_candidates(*, kind: str, dedup_key: str) -> Any:
    """Pending jobs an incoming task of ``kind`` and ``dedup_key`` may merge into, oldest
    first (served by the ``jobqueue_job_dedup`` partial index)."""
    return (
        sql.jobs()
        .filter(status=Status.PENDING, kind=kind, dedup_key=dedup_key)
        .order_by("created_at", "id")
    )


def _merge(request: EnqueueRequest, *, now: datetime) -> tuple[Job, Disposition] | None:
    """Merge into the first pending job of the same kind and dedup key that accepts it.

    Candidates are tried oldest first; one that answers to another idempotency key, or
    for which the task decides ``independent``, is passed over. Returns None when no
    candidate took the task: the caller then inserts.
    """
    assert request.merge is not None
    assert request.dedup_key is not None
    alias = sql.alias()
    with transaction.atomic(using=alias):
        ids = list(
            merge_candidates(kind=request.kind, dedup_key=request.dedup_key).values_list(
                "id", flat=True
            )
        )
        for candidate_id in ids:
            # Waits for (rather than skips) a row another enqueue is merging into, so two
            # merges of one key are applied one after the other and neither is lost.
            candidate = (
                sql.dialect()
                .locked(sql.jobs().filter(id=candidate_id), skip_locked=False)
                .filter(status=Status.PENDING)
                .first()
            )
            if candidate is None:
                continue  # claimed or finished meanwhile
            key = request.idempotency_key
            if key is not None and candidate.idempotency_key not in (None, key):
                continue  # it answers to another key
            plan = request.merge(candidate)
            if plan is None:
                continue
            if _apply_merge(candidate, plan, request, now=now):
                return candidate, "merged"
    return None


def _apply_merge(
    candidate: Job, plan: MergePlan, request: EnqueueRequest, *, now: datetime
) -> bool:
    """Write the plan to the candidate if it is still pending (merge() may have run long
    enough for it to be claimed); whether it was."""
    changes: dict[str, Any] = {}
    if plan.action in ("replace", "with"):
        changes["payload"] = plan.payload
        if plan.action == "replace":
            changes["carry"] = {}
        elif plan.carry is not None:
            changes["carry"] = plan.carry
        changes["priority"] = min(candidate.priority, request.priority)
        changes["visible_at"] = min(candidate.visible_at, request.visible_at(now))
    if request.debounce is not None:
        # Trailing edge: the run moves to a debounce after this enqueue, but never past
        # max_wait after the job's own (first) enqueue.
        due = later(now, request.debounce)
        if request.max_wait is not None:
            due = min(due, later(candidate.created_at, request.max_wait))
        changes["visible_at"] = max(due, now)
    key = request.idempotency_key
    if key is not None and candidate.idempotency_key is None:
        # The surviving job now answers to the key, so a retried request is reused.
        changes["idempotency_key"] = key
    still_pending = sql.jobs().filter(id=candidate.id, status=Status.PENDING)
    if not (still_pending.update(**changes) if changes else still_pending.exists()):
        return False
    for name, value in changes.items():
        setattr(candidate, name, value)
    sql.journal_entries().create(
        job_id=candidate.id,
        kind=candidate.kind,
        run_no=candidate.run_count,
        outcome=Outcome.MERGED,
        recorded_at=now,
        note=f"merge: {plan.action}" + (", debounced" if request.debounce else ""),
        attachment={"incoming": request.payload},
    )
    if changes:
        wakeups.notify(sql.alias(), candidate.queue)
    return True


__all__ = [
    "BULK_BATCH",
    "IDEMPOTENCY",
    "Disposition",
    "EnqueueRequest",
    "MergePlan",
    "NewJob",
    "WrittenJob",
    "active_by_key",
    "enqueue",
    "key_bucket",
    "lock_merges",
    "merge_candidates",
    "merge_lock_name",
    "rate_limited",
    "take_rate_tokens",
    "write_request",
]
