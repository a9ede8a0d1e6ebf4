"""Sentry, as its Celery integration gives it: each run in a scope of its own, a failed
run reported with the job's facts, and a run a transaction when tracing is on.

Optional twice over, as ``tracing``: nothing here imports ``sentry-sdk`` (the ``sentry``
extra), so while the application has not imported it (it must, to call ``init``),
``running`` is a no-op; once it has, nothing is done until it calls ``sentry_sdk.init``
(an active client): ``active()`` is the one check each run pays. No integration is to
be listed in ``init``: the worker's runs are reported whenever the SDK is initialised.

The policy, as Celery's:

- Each run has an isolation scope of its own, its breadcrumbs cleared, tagged with the
  job's ``jobqueue.kind``, ``jobqueue.job_id``, ``jobqueue.queue``, ``jobqueue.attempt``
  (the run's number, 1 on the first) and ``jobqueue.workflow`` (its workflow's id, or
  "none"), and a ``jobqueue`` context with the same and the worker: an event the task
  reports itself (``sentry_sdk.capture_exception``, an ERROR log line through Sentry's
  logging integration) carries them too.
- A run that fails is reported once, when its settlement is decided: one event per
  failed run, with the exception that failed it (a run that could not start, such as
  a payload that no longer fits, as a message). A run that completes, pauses, sleeps,
  waits, is released or cancelled reports nothing (``Pause`` is control flow, as
  Celery's ``Retry``).
- A run given up on past its task's hard limit (its ``timeout``, or its ``time_limit``
  on the process pool, whose child is killed) is a failed run too, reported once by the
  worker that gives up on it and settles it (``timed_out``), with a ``TimedOut``
  exception whose message is the settlement's note; whatever the abandoned run itself
  comes to later (a thread that returns, a coroutine cancelled, a child told to stop)
  reports nothing, as an operator's terminate reports nothing.
- A retried run's event has level ``error`` and tag ``jobqueue.outcome`` ``retried``;
  the run that makes its job dead has level ``fatal``, tags ``jobqueue.outcome`` ``dead``
  and ``jobqueue.dead`` ``yes``.
- Every event's fingerprint is ``["{{ default }}", "django_jobqueue", kind]``: Sentry's
  own grouping (the exception and its stack), split by kind. A retry storm of one error
  is one issue whose event count grows, not a flood of issues; a sampling
  ``before_send`` or Sentry's rate limits bound the events themselves.
- With tracing on (``traces_sample_rate`` or ``traces_sampler``), each run is a
  transaction named by its kind (op ``queue.task``, source ``task``; status
  ``internal_error`` for a failed run), the task's own spans inside it.
- The enqueuing code's trace (its ``sentry-trace`` and ``baggage`` headers,
  ``trace_headers``) is kept with the job, in its stored trace context beside
  OpenTelemetry's, and every run of the job continues it, as Celery's integration
  continues the trace of the code that sent the task: its transaction is a child of the
  enqueuing span, and its events (tracing on or off) are in the enqueuer's trace.

Both generations of the SDK are spoken: 2.x (a run is a ``Transaction``, its facts tags
and data) and 3.x (no transactions: a run is a segment span, streamed, its facts
attributes, its status "ok" or "error"). Which one is read once, from the SDK itself
(``transactions``). And Sentry is an observer: an SDK that fails (an API it changed, a
transport that raises) costs the run its report, with a warning logged, never the run
itself; a slot that died on it would leave its job claimed until the lease ran out.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

from django_jobqueue import observers

logger = logging.getLogger("django_jobqueue")

# The SDK, once the application has imported it (``_sdk``): None until then.
sentry_sdk: Any = None
has_tracing_enabled: Any = None
event_from_exception: Any = None
# Whether it is 2.x, whose runs are transactions (3.x has none: a run is a segment span).
transactions = False

OP = "queue.task"
SYSTEM = "django_jobqueue"
_NOTHING: AbstractContextManager[None] = contextlib.nullcontext()
# The journal outcomes of a failed run, and the level each is reported at.
LEVELS: dict[str, Any] = {"retried": "error", "dead": "fatal"}
# The keys of Sentry's trace headers in a job's stored trace context (``tracing``'s
# carrier, beside OpenTelemetry's ``traceparent``): its baggage under a name of its
# own, which OpenTelemetry's baggage propagator never reads as its own.
TRACE_KEY = "sentry-trace"
BAGGAGE_KEY = "sentry-baggage"


class TimedOut(Exception):
    """A run given up on past its task's hard limit, as Sentry is told of it (Celery's
    ``TimeLimitExceeded``): raised by nothing, it names the failure's type in the event."""


def _sdk() -> Any:
    """The SDK if the application imported it, else None; never imported here.

    An application that reports to Sentry imports ``sentry_sdk`` to call its ``init``,
    so an SDK nobody imported has no client: importing it only to find that out cost
    every worker process about 19 MiB of resident memory (the SDK pulls in urllib3,
    ``email`` and its transports) and a seventh of a second of start-up."""
    global sentry_sdk, has_tracing_enabled, event_from_exception, transactions
    if sentry_sdk is None and "sentry_sdk" in sys.modules:
        import sentry_sdk as sdk
        from sentry_sdk.tracing_utils import has_tracing_enabled as tracing_enabled
        from sentry_sdk.utils import event_from_exception as from_exception

        has_tracing_enabled, event_from_exception = tracing_enabled, from_exception
        transactions = hasattr(sdk, "start_transaction")
        sentry_sdk = sdk
    return sentry_sdk


def _guarded(what: str) -> AbstractContextManager[None]:
    """Where the SDK is called: its failure is logged (``what`` it was doing) and
    dropped (``observers.guarded``)."""
    return observers.guarded("Sentry", what)


def active() -> bool:
    """Whether ``sentry_sdk.init`` made an active client (False without the SDK, or
    with an SDK the application never imported)."""
    sdk = _sdk()
    return sdk is not None and bool(sdk.get_client().is_active())


def trace_headers() -> dict[str, str]:
    """The current trace's headers as a job keeps them (``TRACE_KEY``, ``BAGGAGE_KEY``),
    for the job's runs to continue; {} when Sentry is not active."""
    headers: dict[str, Any] = {}
    if active():
        with _guarded("reading the enqueuer's trace"):
            headers = {
                TRACE_KEY: sentry_sdk.get_traceparent(),
                BAGGAGE_KEY: sentry_sdk.get_baggage(),
            }
    return {key: value for key, value in headers.items() if value}


def running(
    job: Any,
    *,
    worker_id: str,
    carrier: Callable[[str], Mapping[str, str]],
    on: bool | None = None,
) -> AbstractContextManager[Report | None]:
    """The scope (and, with tracing, the transaction) one run of a claimed job runs in,
    continuing the trace the job was enqueued in; it yields the run's ``Report`` (None
    when Sentry is not active). ``carrier`` reads the job's stored trace context (the
    format is ``tracing``'s: ``tracing.carrier``), only when Sentry is active. ``on``:
    whether it is, as the caller found it once (a worker's pipeline, when it is made:
    the check cost each no-op's run 3 µs); None: look now."""
    if not (active() if on is None else on):
        return _NOTHING
    stored = carrier(getattr(job, "trace_context", "") or "")
    headers = {
        name: stored[key]
        for name, key in (("sentry-trace", TRACE_KEY), ("baggage", BAGGAGE_KEY))
        if key in stored
    }
    return _running(job, worker_id, headers)


def job_tags(job: Any) -> dict[str, str]:
    """The tags every event of a run carries."""
    workflow = getattr(job, "workflow_id", None)
    return {
        "jobqueue.kind": job.kind,
        "jobqueue.job_id": str(job.id),
        "jobqueue.queue": getattr(job, "queue", ""),
        "jobqueue.attempt": str(job.run_count),
        "jobqueue.workflow": "none" if workflow is None else str(workflow),
    }


def timed_out(job: Any, *, worker_id: str, outcome: str, note: str) -> None:
    """Report a run the worker gave up on past its hard limit (settled ``outcome`` with
    ``note``), from the worker's loop, in a scope of the run's own tags: the run's own
    scope is on the thread (or in the child) that was abandoned."""
    if not active():
        return
    with _guarded("reporting a run past its limit"), sentry_sdk.isolation_scope() as scope:
        _tag(scope, job, worker_id)
        Report(job).ended(outcome=outcome, error=TimedOut(note), note=note)


def _tag(scope: Any, job: Any, worker_id: str) -> None:
    """A run's scope: its own breadcrumbs only, the job's tags and context."""
    scope.clear_breadcrumbs()
    tags = job_tags(job)
    for name, value in tags.items():
        scope.set_tag(name, value)
    scope.set_context("jobqueue", {**tags, "jobqueue.worker": worker_id})


def _running(
    job: Any, worker_id: str, headers: dict[str, str]
) -> AbstractContextManager[Report | None]:
    """The run's scope and span, or None (the run unreported) when the SDK failed to
    open them. The opening and the closing (the span's end, its send) are guarded
    (``observers.observed``), so that an SDK failing at either costs the report and
    never the run's outcome (a completed run failed by its report would run again)."""
    return observers.observed("Sentry", "a run's scope", lambda: _scope(job, worker_id, headers))


@contextlib.contextmanager
def _scope(job: Any, worker_id: str, headers: dict[str, str]) -> Iterator[Report]:
    """The run's isolation scope, in the enqueuer's trace, and with tracing on its
    transaction (2.x) or segment span (3.x), whose status the report sets."""
    with sentry_sdk.isolation_scope() as scope:
        _tag(scope, job, worker_id)
        report = Report(job)
        # The enqueuer's trace, continued (the scope's propagation context: its events
        # are in that trace, tracing on or off); none kept, the run starts a trace.
        if transactions:
            continued = sentry_sdk.continue_trace(headers, op=OP, name=job.kind, source="task")
        else:
            sentry_sdk.continue_trace(headers)
        if not has_tracing_enabled(sentry_sdk.get_client().options):
            yield report
            return
        facts = {
            "messaging.system": SYSTEM,
            "messaging.message.id": str(job.id),
            "messaging.destination.name": getattr(job, "queue", ""),
            "messaging.message.retry.count": max(job.run_count - 1, 0),
        }
        if transactions:
            with sentry_sdk.start_transaction(continued) as transaction:
                for name, value in facts.items():
                    transaction.set_data(name, value)
                report.transaction = transaction
                yield report
            return
        # 3.x: a segment of its own (no parent span: a run is not part of whatever
        # span the thread has open), its trace's parent the enqueuing span.
        attributes = {"sentry.op": OP, "sentry.segment.name.source": "task"}
        with sentry_sdk.start_span(
            name=job.kind, attributes={**attributes, **job_tags(job), **facts}, parent_span=None
        ) as span:
            report.transaction = span
            yield report


class Report:
    """What one run tells Sentry once it ended (inside its scope)."""

    def __init__(self, job: Any) -> None:
        self.job = job
        self.transaction: Any = None

    def ended(
        self, *, outcome: str, error: BaseException | None, note: str, given_up: bool = False
    ) -> None:
        """The run ended with ``outcome`` (a journal outcome; "" when it settled itself
        or lost its claim): report a failure, and set the transaction's status. A run
        ``given_up`` on (timed out, terminated) was settled by the worker, which reported
        it then: what it came to since is dropped, and reports nothing."""
        with _guarded("reporting a run"):
            self._ended(outcome, error, note, given_up)

    def _ended(self, outcome: str, error: BaseException | None, note: str, given_up: bool) -> None:
        failed = outcome in LEVELS and not given_up
        span = self.transaction
        told = "given-up" if given_up else outcome or "settled"
        if span is not None and transactions:
            span.set_status("aborted" if given_up else "internal_error" if failed else "ok")
            span.set_tag("jobqueue.outcome", told)
        elif span is not None:  # 3.x knows two statuses
            span.status = "error" if given_up or failed else "ok"
            span.set_attribute("jobqueue.outcome", told)
        if not failed:
            return
        if error is not None:
            mechanism = {"type": SYSTEM, "handled": False}
            if transactions:
                options = sentry_sdk.get_client().options
                event, hint = event_from_exception(
                    error, client_options=options, mechanism=mechanism
                )
            else:
                event, hint = event_from_exception(error, mechanism=mechanism)
        else:  # a run that could not start: no exception, its note says why
            first = note.strip().partition("\n")[0] or outcome
            event, hint = {"message": first}, {}
        event["level"] = LEVELS[outcome]
        event["fingerprint"] = ["{{ default }}", SYSTEM, self.job.kind]
        tags = event.setdefault("tags", {})
        tags["jobqueue.outcome"] = outcome
        if outcome == "dead":
            tags["jobqueue.dead"] = "yes"
        sentry_sdk.capture_event(event, hint=hint)
