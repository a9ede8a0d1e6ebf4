"""Sending the job signals (``django_jobqueue.signals``): robustly, with the task as
sender, ``job_enqueued`` only once the enqueue's transaction commits; and showing each
enqueue, at the call and in whatever thread made it, to the test kit's
``captured_jobs()`` (``observe_enqueues``)."""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.dispatch import Signal

from django_jobqueue.signals import job_enqueued
from django_jobqueue.task.registry import registry

if TYPE_CHECKING:
    from django_jobqueue.store import EnqueueRequest
    from django_jobqueue.task.handle import JobHandle

logger = logging.getLogger("django_jobqueue")


def sender_of(kind: str) -> object:
    """What a kind's signals are sent by: the ``@task`` function, the ``Task`` subclass,
    or the registry entry (None for a kind this process does not know)."""
    defn = registry.find(kind)
    if defn is None:
        return None
    # A class task's registry entry wraps the class users connect with.
    return getattr(defn, "cls", defn)


def deliver(signal: Signal, name: str, kind: str, job_id: uuid.UUID, **kwargs: Any) -> None:
    """Send robustly; log each receiver that raised, naming the signal and the job."""
    try:
        responses = signal.send_robust(sender_of(kind), kind=kind, **kwargs)
    except Exception:  # send_robust catches receivers' errors; this would be ours
        logger.exception("%s for job=%s kind=%s could not be sent", name, job_id, kind)
        return
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error(
                "a %s receiver (%s) raised for job=%s kind=%s: %s",
                name,
                getattr(receiver, "__qualname__", receiver),
                job_id,
                kind,
                response,
                exc_info=response,
            )


# --- enqueued -------------------------------------------------------------------------


@dataclass(frozen=True)
class Enqueued:
    """One enqueue as the caller asked for it and what it came to."""

    request: EnqueueRequest
    handle: JobHandle


_observers: list[Callable[[Enqueued], None]] = []
_observers_lock = threading.Lock()


@contextlib.contextmanager
def observe_enqueues(observer: Callable[[Enqueued], None]) -> Iterator[None]:
    """Call ``observer`` with every enqueue made (in any thread) while the block runs,
    at the call, before the transaction commits."""
    with _observers_lock:
        _observers.append(observer)
    try:
        yield
    finally:
        with _observers_lock:
            _observers.remove(observer)


def listening() -> bool:
    """Whether ``enqueued`` would tell anyone (an observer or a ``job_enqueued``
    receiver): a batch that is not heard keeps none of its requests for it."""
    return bool(_observers) or bool(job_enqueued.receivers)


def enqueued(requests: Sequence[EnqueueRequest], handles: Sequence[JobHandle]) -> None:
    """Tell observers now, and ``job_enqueued`` receivers when the transaction commits.
    Called by every enqueue path once its rows are written."""
    if _observers:
        for observer in list(_observers):
            for request, handle in zip(requests, handles, strict=True):
                observer(Enqueued(request, handle))
    if not job_enqueued.receivers:
        return
    pairs = list(zip(requests, handles, strict=True))

    def send(pairs: list[tuple[EnqueueRequest, JobHandle]]) -> None:
        for request, handle in pairs:
            deliver(
                job_enqueued,
                "job_enqueued",
                request.kind,
                handle.id,
                job=handle,
                queue=request.queue,
                disposition=handle.disposition,
            )

    # Each job's receivers hear of it when its own queue database's transaction commits.
    for alias in dict.fromkeys(handle.database for handle in handles):
        mine = [(r, h) for r, h in pairs if h.database == alias]
        transaction.on_commit(partial(send, mine), using=alias, robust=True)
