"""OpenTelemetry: the enqueuing code's trace context kept with its job, a PRODUCER span
around an enqueue, and a CONSUMER span around each run, from its claim to its settlement.

Optional twice over. Without the ``otel`` extra nothing here imports OpenTelemetry and
every function is a no-op. With it, nothing is made (no span, no context captured)
until the application configures a tracer provider: ``active()`` is the one check
each enqueue and each run pays. OpenTelemetry's API is imported only once the
application has imported it (it must, to configure a provider) or names a provider in
the environment (``OTEL_PYTHON_TRACER_PROVIDER``), as ``sentry`` waits for
``sentry_sdk``: a process that traces nothing does not hold its modules (about half a
MiB of every worker process).

A run's span is a child of the enqueuing context on the first attempt; a retry (run
count above 1) starts a trace of its own with a ``Link`` to the enqueuing span, so a
job retried for a day does not stretch its request's trace over that day.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

from django_jobqueue import observers, sentry

# OpenTelemetry's API, once imported (``_api``): None until then, and for good where
# the otel extra is not installed.
trace: Any = None
propagate: Any = None
otel_context: Any = None
Link: Any = None
SpanKind: Any = None
Status: Any = None
StatusCode: Any = None
_NO_PROVIDERS: tuple[type, ...] = ()
PROVIDER_VARIABLE = "OTEL_PYTHON_TRACER_PROVIDER"

SYSTEM = "django_jobqueue"
#: How a failure of OpenTelemetry's is logged (``observers.guarded``): a span is lost,
#: never an enqueue, a run or the worker's loop.
OBSERVER = "OpenTelemetry"
# A carrier longer than this (a propagator carrying a large baggage) is not kept: the
# column is bounded, and a trace context is never worth failing an enqueue for.
CONTEXT_LIMIT = 2048
_NO_SPAN: AbstractContextManager[Any] = contextlib.nullcontext()
_active = False
_env_read = False
# Whether the environment names a tracer provider, read once (None: not yet): it is set
# before a process starts, and reading ``os.environ`` on every job's run cost more than
# the rest of the check.
_env_named: bool | None = None


def _api() -> bool:
    """Import OpenTelemetry's API if it could be in use and is not yet imported here;
    whether it is. In use: the application imported it (``opentelemetry.trace`` is in
    ``sys.modules``), or the environment names a tracer provider for the API to load.
    Not installed (the otel extra): never."""
    global trace, propagate, otel_context, Link, SpanKind, Status, StatusCode, _NO_PROVIDERS
    global _env_named
    if trace is not None:
        return True
    if "opentelemetry.trace" not in sys.modules:
        if _env_named is None:
            _env_named = bool(os.environ.get(PROVIDER_VARIABLE))
        if not _env_named:
            return False
    try:
        from opentelemetry import context as api_context
        from opentelemetry import propagate as api_propagate
        from opentelemetry import trace as api_trace
        from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider
    except ImportError:  # the otel extra is not installed: tracing is off
        return False
    Link, SpanKind = api_trace.Link, api_trace.SpanKind
    Status, StatusCode = api_trace.Status, api_trace.StatusCode
    _NO_PROVIDERS = (ProxyTracerProvider, NoOpTracerProvider)
    otel_context, propagate, trace = api_context, api_propagate, api_trace
    return True


def active() -> bool:
    """Whether an application configured a tracer provider (the API alone gives none).

    No "no provider" is cached: like OpenTelemetry's own proxy tracer, each call reads
    the API's global provider (one attribute read), so a provider set at any time is
    used by the very next enqueue. The first call with the API imported asks it once,
    which loads a provider named by the environment (``OTEL_PYTHON_TRACER_PROVIDER``).
    A provider, once set, stays: OpenTelemetry never replaces it, so True is kept."""
    global _active, _env_read
    if _active or not _api():
        return _active
    if not _env_read:
        _env_read = True
        trace.get_tracer_provider()
    provider = trace._TRACER_PROVIDER  # the API's own global, read as its proxy does
    if provider is None:
        return False
    _active = not isinstance(provider, _NO_PROVIDERS)
    return _active


def refresh() -> None:
    """Forget what ``active`` found (for tests that set and reset a provider)."""
    global _active, _env_read, _env_named
    _active, _env_read, _env_named = False, False, None


def capture_context() -> str:
    """The current trace context as the job stores it: the configured propagator's
    carrier (W3C ``traceparent`` and ``tracestate`` by default) and Sentry's trace
    headers (``sentry.trace_headers``), as JSON text; "" when neither is on, there is
    no current span, or the carrier is too long.

    Every path that writes a new job calls this (enqueue, bulk enqueue, workflows)."""
    carrier: dict[str, str] = {}
    if active():
        with observers.guarded(OBSERVER, "reading the enqueuer's trace context"):
            propagate.inject(carrier)
    carrier.update(sentry.trace_headers())
    if not carrier:
        return ""
    text = json.dumps(carrier, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= CONTEXT_LIMIT else ""


def carrier(stored: str) -> dict[str, str]:
    """A job's stored context as its carrier ({} when there is none, or it cannot be
    read). Needs no OpenTelemetry."""
    try:
        found = json.loads(stored) if stored else None
    except ValueError:
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items()}


def trace_id(stored: str) -> str:
    """The trace id in a job's stored context ("" when none can be read), to find the
    enqueuing request's trace in a tracing backend: OpenTelemetry's, else Sentry's
    (``sentry-trace`` is ``trace id-span id[-sampled]``). Needs no OpenTelemetry."""
    headers = carrier(stored)
    parts = headers.get("traceparent", "").split("-")
    if len(parts) == 4 and len(parts[1]) == 32:
        return parts[1]
    parts = headers.get(sentry.TRACE_KEY, "").split("-")
    return parts[0] if len(parts) in (2, 3) and len(parts[0]) == 32 else ""


def _tracer() -> Any:
    return trace.get_tracer(SYSTEM)


def _job_attributes(*, job_id: Any, kind: str, queue: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.message.id": str(job_id),
        "jobqueue.job.id": str(job_id),
        "jobqueue.job.kind": kind,
        "jobqueue.job.queue": queue,
    }


def enqueue_span(*, kind: str, queue: str, count: int = 1) -> AbstractContextManager[Any]:
    """A PRODUCER span around writing ``count`` jobs (None when tracing is off): the
    jobs' stored context is this span's, so their runs hang off the enqueue."""
    if not active():
        return _NO_SPAN
    return observers.observed(
        OBSERVER, "an enqueue's span", lambda: _enqueue_span(kind=kind, queue=queue, count=count)
    )


@contextlib.contextmanager
def _enqueue_span(*, kind: str, queue: str, count: int) -> Iterator[Any]:
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation": "publish",
        "messaging.operation.type": "send",
        "messaging.destination.name": queue,
        "jobqueue.job.kind": kind,
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    name = f"publish {kind}" if count == 1 else f"publish {count} jobs"
    with _tracer().start_as_current_span(name, kind=SpanKind.PRODUCER, attributes=attributes) as s:
        yield s


def enqueued(span: Any, *, job_id: Any, disposition: str) -> None:
    """Name the job an enqueue span wrote (or merged into, or reused)."""
    if span is None:
        return
    with observers.guarded(OBSERVER, "naming an enqueue's job"):
        span.set_attribute("jobqueue.job.id", str(job_id))
        span.set_attribute("messaging.message.id", str(job_id))
        span.set_attribute("jobqueue.enqueue.disposition", disposition)


def _stored(text: str) -> Any:
    """The stored carrier as a context (None: there is none, or it cannot be read)."""
    found = carrier(text)
    return propagate.extract(found) if found else None


def start_run(job: Any, *, worker_id: str) -> Any:
    """The CONSUMER span of one run of a claimed job, started (None when tracing is off).

    The first attempt is a child of the stored enqueue context; a retry starts a new
    trace linked to it. Not made current here: ``current`` does that on the thread
    that runs the task."""
    if not active():
        return None
    with observers.guarded(OBSERVER, "starting a run's span"):
        return _start_run(job, worker_id)
    return None


def _start_run(job: Any, worker_id: str) -> Any:
    parent = _stored(getattr(job, "trace_context", ""))
    attributes = _job_attributes(job_id=job.id, kind=job.kind, queue=getattr(job, "queue", ""))
    attributes.update(
        {
            "messaging.operation": "process",
            "messaging.operation.type": "process",
            "jobqueue.job.attempt": job.run_count,
            "jobqueue.worker.id": worker_id,
        }
    )
    links: list[Any] = []
    if job.run_count > 1:
        remote = trace.get_current_span(parent).get_span_context() if parent else None
        if remote is not None and remote.is_valid:
            links.append(Link(remote, {"jobqueue.link": "enqueue"}))
        parent = otel_context.Context()  # a root: no parent, whatever is current here
    elif parent is None:
        parent = otel_context.Context()
    span = _tracer().start_span(
        f"process {job.kind}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
    )
    span.add_event("jobqueue.claimed", {"jobqueue.worker.id": worker_id})
    return span


def current(span: Any) -> AbstractContextManager[Any]:
    """Make the run's span current while its task runs, so the task's own spans (its
    queries, its HTTP calls) are its children. Nothing when there is no span."""
    if span is None:
        return _NO_SPAN
    return observers.observed(
        OBSERVER,
        "a run's span as the current one",
        lambda: trace.use_span(span, end_on_exit=False, record_exception=False),
    )


def ran(span: Any, *, end: str, error: BaseException | None, note: str = "") -> None:
    """Record how the task ended on its span: an event, and a failure's exception.
    Nothing on a span already ended (a timed-out run's settlement came first)."""
    if span is None:
        return
    with observers.guarded(OBSERVER, "recording a run's end"):
        if not span.is_recording():
            return
        span.add_event("jobqueue.run.ended", {"jobqueue.run.end": end})
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__qualname__}"))
        elif end in ("failed", "permanent", "mismatch"):
            span.set_status(Status(StatusCode.ERROR, note.splitlines()[0][:200] if note else end))


def settled(span: Any, *, outcome: str, applied: bool) -> None:
    """End a run's span once its settlement is written (or refused by the guard). On the
    worker's loop thread: an exporter or span processor that raises here is logged, and
    the loop goes on."""
    if span is None:
        return
    with observers.guarded(OBSERVER, "ending a run's span"):
        if not span.is_recording():
            return
        span.set_attribute("jobqueue.job.outcome", outcome if applied else "lost")
        span.add_event("jobqueue.settled", {"jobqueue.job.outcome": outcome, "applied": applied})
        span.end()
