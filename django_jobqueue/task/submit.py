"""Handing validated enqueue requests to the store, and naming the bad item of a batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_jobqueue import store
from django_jobqueue.errors import (
    EnqueueError,
)
from django_jobqueue.task import signalling
from django_jobqueue.task.handle import JobHandle

if TYPE_CHECKING:
    from django_jobqueue.store import EnqueueRequest
    from django_jobqueue.task.handle import JobHandle


def submit(request: EnqueueRequest) -> JobHandle:
    # Imported here so that the task layer stays free of the database at import time.

    row, disposition = store.enqueue(request)
    handle = JobHandle(row, disposition)
    signalling.enqueued([request], [handle])
    return handle


def submit_many(requests: list[EnqueueRequest]) -> list[JobHandle]:
    handles = [JobHandle(row, disposition) for row, disposition in store.enqueue_many(requests)]
    signalling.enqueued(requests, handles)
    return handles


def items_error(index: int, exc: EnqueueError) -> EnqueueError:
    """The same error, its message naming the item of a bulk enqueue that caused it."""
    facts = {**exc.facts, "index": index}
    return type(exc)(f"item {index}: {exc}", **facts)
