"""Django signals for a job's life: ``job_enqueued``, ``job_started`` and ``job_finished``.

Each is sent only when a receiver is connected (an empty receiver list costs the hot
paths one attribute read), and always with ``send_robust``: a receiver that raises is
logged and the next one still runs; it never breaks an enqueue, a run or a worker.

- ``job_enqueued`` is sent once the enqueue's transaction commits (at once in
  autocommit), so a receiver never hears of a job that was rolled back. Keyword
  arguments: ``job`` (the ``JobHandle`` the enqueue returned), ``kind``, ``queue`` and
  ``disposition`` (``inserted``, ``merged`` or ``reused``).
- ``job_started`` is sent on the thread that runs the job, just before it runs:
  ``job`` (a ``JobHandle``, status ``claimed``), ``kind``, ``queue``, ``run_no`` (1 on
  the first run) and ``worker`` (the worker's ``host:pid``).
- ``job_finished`` is sent by the worker's loop thread once a run's settlement is
  written (for a run that settled itself in its own transaction, an atomic task's,
  once that committed): ``job`` (a ``JobHandle`` whose ``status`` is the job's new status and whose
  ``result`` is the run's result), ``kind``, ``run_no``, ``outcome`` (the journal
  outcome: ``completed``, ``paused``, ``retried``, ``dead``, ``released`` or
  ``cancelled``), ``duration`` (a ``timedelta``; None for a run released at shutdown),
  ``note`` (the journal note, such as the error text) and ``worker``.

``sender`` is the task: the ``@task`` function, or the ``Task`` subclass (for a job
of the Django Tasks backend, its registry entry).

Enqueues are also shown, at the call and in whatever thread made them, to the test
kit's ``captured_jobs()`` through ``observe_enqueues``. The Signal objects live here;
``job_started`` and ``job_finished`` are sent by ``run.announce``, for the run pipeline.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.dispatch import Signal

from django_jobqueue import conf
from django_jobqueue.task.registry import registry

if TYPE_CHECKING:
    from django_jobqueue.store import EnqueueRequest
    from django_jobqueue.task.handle import JobHandle

logger = logging.getLogger("django_jobqueue")

job_enqueued = Signal()
job_started = Signal()
job_finished = Signal()


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

    def send() -> None:
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

    transaction.on_commit(send, using=conf.get().database, robust=True)
