"""Handing validated enqueue requests to the store, each on its queue database, and
naming the bad item of a batch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from django_jobqueue import routing, store
from django_jobqueue.errors import (
    EnqueueError,
)
from django_jobqueue.task import signalling
from django_jobqueue.task.handle import JobHandle

if TYPE_CHECKING:
    from django_jobqueue.models import Job
    from django_jobqueue.store import Disposition, EnqueueRequest, NewJob, WrittenJob
    from django_jobqueue.task.handle import JobHandle


def submit(request: EnqueueRequest) -> JobHandle:
    if not routing.several():  # one database: not a statement, not a call more
        row, disposition = store.enqueue(request)
        handle = JobHandle(row, disposition)
    else:
        with store.on_database(database_of(request)) as alias:
            row, disposition = store.enqueue(request)
            handle = JobHandle(row, disposition, database=alias)
    signalling.enqueued([request], [handle])
    return handle


def submit_many(requests: list[EnqueueRequest]) -> list[JobHandle]:
    if not routing.several():
        handles = _handles(store.enqueue_many(requests))
    else:
        handles = _routed_many(requests)
    signalling.enqueued(requests, handles)
    return handles


def submit_checked(
    template: EnqueueRequest, requests: Iterator[EnqueueRequest], count: int
) -> list[JobHandle]:
    """``submit_many`` of ``count`` requests like ``template``, each checked as it is
    written (``store.enqueue_stream``) when the store can take them so (``store.streamable``)
    and they all go to one database; else checked first, then written."""
    if routing.several() or not store.streamable(template):
        return submit_many(list(requests))
    if not signalling.listening():  # no one to tell: the requests go with their rows
        return _handles(store.enqueue_stream(template, requests, count))
    seen: list[EnqueueRequest] = []

    def kept() -> Iterator[EnqueueRequest]:
        for request in requests:
            seen.append(request)
            yield request

    handles = _handles(store.enqueue_stream(template, kept(), count))
    signalling.enqueued(seen, handles)
    return handles


def _handles(written: Sequence[tuple[Job | NewJob | WrittenJob, Disposition]]) -> list[JobHandle]:
    """The handles of a batch written to the one queue database there is."""
    alias = routing.current()  # looked up once, not by each of the handles
    return [JobHandle(row, d, database=alias) for row, d in written]


def database_of(request: EnqueueRequest) -> str:
    """The queue database ``request`` goes to (``routing.target``)."""
    return routing.target(kind=request.kind, queue=request.queue, key=request.job_key)


def _routed_many(requests: list[EnqueueRequest]) -> list[JobHandle]:
    """Each database's share of a batch in one ``enqueue_many`` of its own (one
    transaction each: a batch over several databases is not atomic as a whole), the
    handles back in the batch's order."""
    shares: dict[str, list[int]] = {}
    for index, request in enumerate(requests):
        shares.setdefault(database_of(request), []).append(index)
    handles: list[JobHandle | None] = [None] * len(requests)
    for alias, indexes in shares.items():
        with store.on_database(alias):
            written: list[tuple[Job | NewJob | WrittenJob, Disposition]] = store.enqueue_many(
                [requests[i] for i in indexes]
            )
        for index, (row, disposition) in zip(indexes, written, strict=True):
            handles[index] = JobHandle(row, disposition, database=alias)
    return [h for h in handles if h is not None]


def items_error(index: int, exc: EnqueueError) -> EnqueueError:
    """The same error, its message naming the item of a bulk enqueue that caused it."""
    facts = {**exc.facts, "index": index}
    return type(exc)(f"item {index}: {exc}", **facts)
