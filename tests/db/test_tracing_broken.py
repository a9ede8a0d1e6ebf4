"""OpenTelemetry is an observer: an SDK that fails (a span processor or exporter that
raises, a propagator or tracer that cannot work) costs spans, never an enqueue, a run's
outcome or the worker's loop, which ends every run's span as it writes the settlement.
Each failure is logged ("OpenTelemetry: … failed; the queue goes on without it"), its
traceback the first time. Before, a processor raising as a span ended stopped the
worker's loop at its first settlement, and one raising at a span's start failed runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.util._once import Once

from django_jobqueue import Status, tracing
from django_jobqueue.models import Job, JournalEntry
from tests.helpers import WorkerThread, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class Failing(SpanProcessor):
    """A span processor that raises where it is told to (``on_start``, ``on_end``)."""

    def __init__(self, at: str) -> None:
        self.at = at

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.at == "start":
            raise RuntimeError("the exporter is down")

    def on_end(self, span: Any) -> None:
        if self.at == "end":
            raise RuntimeError("the exporter is down")


def _reset_global_provider() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    tracing.refresh()


@pytest.fixture
def failing() -> Iterator[Callable[[str], None]]:
    """Install a tracer provider whose processor fails at ``start`` or ``end``."""
    providers: list[TracerProvider] = []

    def install(at: str) -> None:
        provider = TracerProvider()
        provider.add_span_processor(Failing(at))
        providers.append(provider)
        _reset_global_provider()
        trace.set_tracer_provider(provider)

    yield install
    for provider in providers:
        provider.shutdown()
    _reset_global_provider()


def _all_completed_once(ids: list[Any]) -> bool:
    jobs = Job.objects.filter(id__in=ids)
    return {(j.status, j.run_count) for j in jobs} == {(Status.COMPLETED, 1)}


@pytest.mark.parametrize("at", ["start", "end"])
def test_a_failing_span_processor_costs_the_spans_never_an_enqueue_a_run_or_the_loop(
    at: str,
    failing: Callable[[str], None],
    worker_thread: Callable[..., WorkerThread],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="django_jobqueue")
    failing(at)
    # The enqueue's PRODUCER span fails to start or to end: the enqueue goes on.
    handles = [tasks.add.enqueue(a=i, b=1) for i in range(3)]
    ids = [h.id for h in handles]
    assert Job.objects.filter(id__in=ids).count() == 3
    # One slot: each run's span fails as it starts or as the loop ends it at settling;
    # every job completes in one run, and the loop lives on to claim the next.
    worker = worker_thread(kinds=[tasks.add.kind], concurrency=1)
    wait_for(lambda: _all_completed_once(ids), timeout=60)
    assert worker.thread.is_alive()
    assert set(JournalEntry.objects.filter(job_id__in=ids).values_list("outcome", flat=True)) == {
        "completed"
    }
    said = caplog.text
    if at == "start":
        assert "OpenTelemetry: opening an enqueue's span failed" in said
        assert "OpenTelemetry: starting a run's span failed" in said
    else:
        assert "OpenTelemetry: closing an enqueue's span failed" in said
        assert "OpenTelemetry: ending a run's span failed" in said
    assert "the queue goes on without it" in said
    assert said.count("Traceback") <= 2, "a traceback once for each thing that failed"


def test_a_propagator_that_fails_leaves_the_job_without_a_trace_context(
    failing: Callable[[str], None], caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        fields: set[str] = set()

        def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
            raise RuntimeError("no propagator")

        def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
            raise RuntimeError("no propagator")

    failing("never")
    before = propagate.get_global_textmap()
    propagate.set_global_textmap(Broken())  # type: ignore[arg-type]
    try:
        handle = tasks.add.enqueue(a=1, b=2)
    finally:
        propagate.set_global_textmap(before)
    assert Job.objects.get(id=handle.id).trace_context == ""
    assert "OpenTelemetry: reading the enqueuer's trace context failed" in caplog.text
