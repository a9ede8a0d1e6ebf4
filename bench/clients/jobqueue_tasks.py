"""django_jobqueue's Django Tasks backend, enqueue side (settings_jobqueue_tasks)."""

from __future__ import annotations

from django.core.management import call_command

from bench.clients import paced, per_request, timed_calls
from bench.djtasksapp.tasks import noop, stamp
from django_jobqueue import store
from django_jobqueue.backend import JobQueueBackend, tier
from django_jobqueue.backend.compat import task_backends
from django_jobqueue.task.options import Options, build_request


def install() -> None:
    call_command("migrate", verbosity=0, interactive=False)


def enqueue_each(n: int) -> float:
    """``noop.enqueue()`` through the django.tasks API, each call its own transaction."""
    return timed_calls(noop.enqueue, n)


def enqueue_requests(n: int) -> float:
    """``noop.enqueue()`` once per simulated request (``per_request``)."""
    return per_request(noop.enqueue, n)


def enqueue_bulk(n: int) -> float:
    raise NotImplementedError("django.tasks has no bulk enqueue")


def preload(n: int) -> None:
    """``n`` rows exactly as ``noop.enqueue()`` writes them, in one bulk insert (untimed)."""
    backend = task_backends["default"]
    assert isinstance(backend, JobQueueBackend)
    defn = backend.definition(noop)
    payload, text = backend.payload_for(defn, noop, [], {})
    options = Options.build(priority=tier(noop.priority), queue=noop.queue_name)
    store.enqueue_many([build_request(defn, payload, options, payload_json=text)] * n)


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    def submit(label: str) -> None:
        stamp.enqueue(label=label)

    return paced(count, gap, warmup, submit)
