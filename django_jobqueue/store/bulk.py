"""Writing many jobs in one transaction (``enqueue_many``, and a workflow's steps' rows).

The plain requests of a batch (no idempotency key, no merge) go to the dialect as one
stream of rows, made as they are written: PostgreSQL loads them with one ``COPY``
(``dialects.postgresql.copying``), the other databases with multi-row INSERTs within
their limits. The others go through ``inserting.enqueue`` one by one in the same
transaction, in order. The rate tokens and merge locks are taken for the whole batch
first. ``enqueue_many`` is given requests the task layer has checked; ``enqueue_stream``
a batch of plain ones as the task layer checks them, a bad one raising from the
stream and rolling the batch back.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from django_jobqueue import tracing
from django_jobqueue.ids import uuid7_many
from django_jobqueue.models import Job
from django_jobqueue.store import sql
from django_jobqueue.store.dialects.base.storage import NewRow
from django_jobqueue.store.inserting import (
    Disposition,
    EnqueueRequest,
    NewJob,
    WrittenJob,
    lock_merges,
    take_rate_tokens,
    write_request,
)


def enqueue_many(
    requests: Sequence[EnqueueRequest],
) -> list[tuple[Job | NewJob | WrittenJob, Disposition]]:
    """Write many jobs in one transaction: the plain ones as one stream of rows.

    Requests with an idempotency key or a merge go through ``write_request`` one by one in
    the same transaction (in order, so a key repeated in the batch is reused).
    Returns a (row, disposition) per request, in order.

    Rate-limited kinds take the batch's tokens first, all of a kind at once: if any kind
    has too few, ``RateLimited`` and nothing of the batch is written. Traced, the batch
    is one PRODUCER span, whose context every job of it keeps.
    """
    if not requests:
        return []
    kinds = {r.kind for r in requests}
    queues = {r.queue for r in requests}
    with _batch(
        kind=next(iter(kinds)) if len(kinds) == 1 else "(several)",
        queue=next(iter(queues)) if len(queues) == 1 else "(several)",
        count=len(requests),
    ) as (now, context):
        return _enqueue_many(requests, now, context)


def _enqueue_many(
    requests: Sequence[EnqueueRequest], now: datetime, context: str
) -> list[tuple[Job | NewJob | WrittenJob, Disposition]]:
    """The batch's rows, within its frame (``_batch``)."""
    out: list[tuple[Job | NewJob | WrittenJob, Disposition] | None] = [None] * len(requests)
    plain: list[int] = []
    take_rate_tokens(requests)
    lock_merges(requests)  # all at once, in one order, before any of them
    for i, request in enumerate(requests):
        if _one_by_one(request):
            out[i] = write_request(request)
        else:
            plain.append(i)
    if plain:
        _write([requests[i] for i in plain], plain, out, now, context)
    return [item for item in out if item is not None]


def streamable(template: EnqueueRequest) -> bool:
    """Whether a batch whose jobs differ from ``template`` only in payload and key can be
    written as it is checked (``enqueue_stream``): no idempotency key or merge (their
    rows go one by one, after a look at the table) and no rate per key (whose tokens
    depend on every item's key)."""
    return not _one_by_one(template) and template.rate_per_key is None


def _one_by_one(request: EnqueueRequest) -> bool:
    """Whether a request's row is written alone, after a look at the table: it has an
    idempotency key, or a dedup key that merges."""
    return request.idempotency_key is not None or request.merge_key is not None


def enqueue_stream(
    template: EnqueueRequest, requests: Iterator[EnqueueRequest], count: int
) -> list[tuple[NewJob, Disposition]]:
    """``enqueue_many`` of ``count`` requests like ``template`` (``streamable``), written as
    ``requests`` yields them: the checks that make each one (the task layer's) run while
    the server inserts the rows before it, instead of all of them before the first row
    is sent. A bad item raises from ``requests``; the batch's transaction (a savepoint
    in the caller's) is rolled back with it, so nothing of the batch is written."""
    if count == 0:
        return []
    out: list[Any] = [None] * count
    with _batch(kind=template.kind, queue=template.queue, count=count) as (now, context):
        take_rate_tokens([template], each=count)
        _write(requests, range(count), out, now, context)
    return out


@contextlib.contextmanager
def _batch(kind: str, queue: str, count: int) -> Iterator[tuple[datetime, str]]:
    """A batch's frame: one PRODUCER span, whose context every job of it keeps, one
    ``now`` for all its rows, and one transaction (a savepoint in the caller's)."""
    with tracing.enqueue_span(kind=kind, queue=queue, count=count):
        context = tracing.capture_context()
        now = timezone.now()
        with transaction.atomic(using=sql.alias()):
            yield now, context


def _write(
    requests: Iterable[EnqueueRequest],
    places: Sequence[int],
    out: list[Any],
    now: datetime,
    context: str,
) -> None:
    """Insert the plain ``requests``' rows in one call, made as they are written (each
    database's dialect sizes its own statements: PostgreSQL one COPY, the others
    multi-row VALUES within their limits), each row's entry put at its place in ``out``
    (one place per request)."""
    rows = bulk_rows(requests, _drawn(len(places)), now, context)
    sql.dialect().insert_jobs(_noted(rows, places, out))


def _drawn(count: int) -> Iterator[uuid.UUID]:
    """``count`` new ids in increasing order (so the rows' ids follow the items'), drawn
    a piece at a time as the rows are made: like the rest of a row, while the server
    inserts the rows before it."""
    for start in range(0, count, _ID_PIECE):
        yield from uuid7_many(min(_ID_PIECE, count - start))


_ID_PIECE = 1000


def _noted(rows: Iterator[NewRow], places: Iterable[int], out: list[Any]) -> Iterator[NewRow]:
    """``rows`` as they are written, each one's (job, disposition) put in its place in
    ``out`` on the way: made while the server inserts the rows sent before it (COPY
    takes them as they come), not after the last one, when the server is done and the
    client would be working alone (a tenth of a 50,000-job bulk's time). A bulk that
    fails part way raises, and ``out`` is dropped with the transaction."""
    for row, i in zip(rows, places, strict=True):
        out[i] = (NewJob(id=row.id, kind=row.kind), "inserted")
        yield row


def bulk_rows(
    requests: Iterable[EnqueueRequest], ids: Iterable[uuid.UUID], now: datetime, context: str
) -> Iterator[NewRow]:
    """The new rows of a bulk's plain requests (or a workflow's steps), one per id, made
    as they are read; when each becomes visible is worked out once per distinct delay,
    run_at and debounce (a bulk's items usually share them)."""
    visible: dict[tuple[Any, ...], datetime] = {}
    for job_id, request in zip(ids, requests, strict=True):
        timing = (request.delay, request.run_at, request.debounce)
        at = visible.get(timing)
        if at is None:
            at = visible[timing] = request.visible_at(now)
        payload = request.payload_json
        yield (
            NewRow(
                id=job_id,
                kind=request.kind,
                queue=request.queue,
                payload=sql.dumps(request.payload) if payload is None else payload,
                priority=request.priority,
                created_at=now,
                visible_at=at,
                trace_context=context,
                job_key=request.job_key,
            )
        )


__all__ = ["bulk_rows", "enqueue_many", "enqueue_stream", "streamable"]
