"""OpenTelemetry: the enqueuing trace context kept with each job, and the structure of
enqueue → run → retry spans, exported to the SDK's in-memory exporter.

The first attempt's span is a child of the enqueue's PRODUCER span (same trace); a
retry's span starts a trace of its own, linked to that PRODUCER span.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from django_jobqueue import tracing
from django_jobqueue.models import Job
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _reset_global_provider() -> None:
    # OpenTelemetry lets a process set its provider once; its own test kit resets the
    # same two globals between tests (opentelemetry.test.globals_test).
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    tracing.refresh()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A tracer provider exporting to memory, for this test only."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    _reset_global_provider()


def named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_a_run_is_a_child_of_its_enqueue_and_a_retry_starts_a_new_trace_linked_to_it(
    spans: InMemorySpanExporter,
) -> None:
    tracer = trace.get_tracer("tests")
    with tracer.start_as_current_span("POST /orders") as request:
        handle = tasks.fail_times.enqueue(1)  # fails its first run, completes its second
    ran = run_jobs(now=timezone.now() + timedelta(days=1))
    assert [h.status for h in ran] == ["pending", "completed"]

    [producer] = named(spans, "publish")
    [first, retry] = sorted(
        named(spans, "process"), key=lambda s: s.attributes["jobqueue.job.attempt"]
    )
    request_context = request.get_span_context()

    # enqueue: a PRODUCER span in the request's trace, whose context the job keeps
    assert producer.kind is SpanKind.PRODUCER
    assert producer.parent is not None
    assert producer.parent.span_id == request_context.span_id
    assert producer.context.trace_id == request_context.trace_id
    assert producer.attributes["jobqueue.job.id"] == str(handle.id)
    assert producer.attributes["messaging.system"] == "django_jobqueue"
    stored = json.loads(Job.objects.get(id=handle.id).trace_context)
    assert stored["traceparent"].split("-")[2] == f"{producer.context.span_id:016x}"

    # first attempt: a CONSUMER child of the PRODUCER span, failed with its exception
    assert first.kind is SpanKind.CONSUMER
    assert first.parent is not None
    assert first.parent.span_id == producer.context.span_id
    assert first.context.trace_id == request_context.trace_id
    assert not first.links
    assert first.attributes["jobqueue.job.outcome"] == "retried"
    assert first.attributes["jobqueue.job.kind"] == tasks.fail_times.kind
    assert first.attributes["jobqueue.job.queue"] == "default"
    assert first.attributes["messaging.operation"] == "process"
    assert first.status.status_code is StatusCode.ERROR
    [exception] = [e for e in first.events if e.name == "exception"]
    assert exception.attributes["exception.type"] == "RuntimeError"
    assert "planned failure 1 of 1" in exception.attributes["exception.message"]
    assert [e.name for e in first.events if e.name.startswith("jobqueue.")] == [
        "jobqueue.claimed",
        "jobqueue.run.ended",
        "jobqueue.settled",
    ]

    # the retry: a new trace (no parent), linked to the enqueuing span
    assert retry.parent is None
    assert retry.context.trace_id != request_context.trace_id
    [link] = retry.links
    assert link.context.span_id == producer.context.span_id
    assert link.context.trace_id == producer.context.trace_id
    assert retry.attributes["jobqueue.job.attempt"] == 2
    assert retry.attributes["jobqueue.job.outcome"] == "completed"
    assert retry.status.status_code is StatusCode.UNSET


def test_the_task_s_own_spans_are_children_of_its_run(spans: InMemorySpanExporter) -> None:
    tasks.traced.enqueue("inner")
    run_jobs()
    [run] = named(spans, "process")
    [inner] = named(spans, "inner")
    assert inner.parent is not None
    assert inner.parent.span_id == run.context.span_id


def test_a_bulk_enqueue_is_one_producer_span_whose_context_every_job_keeps(
    spans: InMemorySpanExporter,
) -> None:
    handles = tasks.add.enqueue_many([{"a": n, "b": n} for n in range(3)])
    [producer] = named(spans, "publish")
    assert producer.kind is SpanKind.PRODUCER
    assert producer.attributes["messaging.batch.message_count"] == 3
    contexts = {Job.objects.get(id=h.id).trace_context for h in handles}
    assert len(contexts) == 1
    [text] = contexts
    assert json.loads(text)["traceparent"].split("-")[2] == f"{producer.context.span_id:016x}"
    run_jobs()
    runs = named(spans, "process")
    assert len(runs) == 3
    assert {r.parent.span_id for r in runs if r.parent} == {producer.context.span_id}


def test_a_permanent_failure_records_its_exception_and_an_error_status(
    spans: InMemorySpanExporter,
) -> None:
    tasks.permanent.enqueue("no such customer")
    run_jobs()
    [run] = named(spans, "process")
    assert run.attributes["jobqueue.job.outcome"] == "dead"
    assert run.status.status_code is StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in run.events if e.name == "exception"] == [
        "django_jobqueue.rules.control.Permanent"
    ]


def test_without_a_tracer_provider_nothing_is_captured_or_made() -> None:
    assert not tracing.active()
    assert tracing.capture_context() == ""
    with tracing.enqueue_span(kind="k", queue="q") as span:
        assert span is None
    handle = tasks.add.enqueue(1, 2)
    assert Job.objects.get(id=handle.id).trace_context == ""
    assert [h.result for h in run_jobs()] == [3]


def test_a_stored_context_that_cannot_be_read_starts_a_run_of_its_own(
    spans: InMemorySpanExporter,
) -> None:
    handle = tasks.add.enqueue(1, 2)
    Job.objects.filter(id=handle.id).update(trace_context="{not json")
    assert [h.result for h in run_jobs()] == [3]
    [run] = named(spans, "process")
    assert run.parent is None
    assert not run.links


def test_a_carrier_over_the_limit_is_not_kept(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tracing, "CONTEXT_LIMIT", 10)
    with trace.get_tracer("tests").start_as_current_span("request"):
        assert tracing.capture_context() == ""
    monkeypatch.undo()
    with trace.get_tracer("tests").start_as_current_span("request"):
        carrier: dict[str, Any] = json.loads(tracing.capture_context())
    assert set(carrier) == {"traceparent"}


def test_jobqueue_show_prints_the_trace_id_the_job_was_enqueued_in(
    spans: InMemorySpanExporter,
) -> None:
    from io import StringIO

    from django.core.management import call_command

    with trace.get_tracer("tests").start_as_current_span("POST /orders") as request:
        handle = tasks.add.enqueue(1, 2)
    out = StringIO()
    call_command("jobqueue", "show", str(handle.id), stdout=out)
    trace_id = f"{request.get_span_context().trace_id:032x}"
    assert f"trace id:         {trace_id}" in out.getvalue()


@pytest.mark.parametrize(
    "stored",
    ["", "{not json", "[]", '{"traceparent": 5}', '{"traceparent": "00-short-01"}', '{"b3": "x"}'],
)
def test_a_stored_context_without_a_readable_traceparent_has_no_trace_id(stored: str) -> None:
    assert tracing.trace_id(stored) == ""


def test_a_provider_set_after_an_enqueue_without_one_traces_the_very_next_enqueue() -> None:
    """No "no provider" is remembered: the enqueue right after the provider is set
    makes its span (it used to wait up to a second for a recheck)."""
    _reset_global_provider()
    tasks.add.enqueue(1, 2)  # no provider yet: nothing traced, and nothing to trace
    assert not tracing.active()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        tasks.add.enqueue(3, 4)
        assert [s.kind for s in named(exporter, "publish")] == [SpanKind.PRODUCER]
    finally:
        provider.shutdown()
        _reset_global_provider()
