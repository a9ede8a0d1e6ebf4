"""Without ``sentry_sdk.init`` (or without the SDK), a run reports nothing to Sentry and
``running`` gives no report: the one check each run pays; an enqueue keeps no Sentry
trace headers."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from django_jobqueue import sentry, tracing


def test_without_an_initialised_sdk_a_run_has_no_report() -> None:
    job = SimpleNamespace(id=uuid.uuid4(), kind="k", queue="q", run_count=1, workflow_id=None)
    assert not sentry.active()
    with sentry.running(job, worker_id="w:1", carrier=tracing.carrier) as report:
        assert report is None
    assert sentry.trace_headers() == {}


def test_the_tags_name_the_job() -> None:
    workflow = uuid.uuid4()
    job = SimpleNamespace(id=uuid.uuid4(), kind="k", queue="q", run_count=2, workflow_id=workflow)
    assert sentry.job_tags(job) == {
        "jobqueue.kind": "k",
        "jobqueue.job_id": str(job.id),
        "jobqueue.queue": "q",
        "jobqueue.attempt": "2",
        "jobqueue.workflow": str(workflow),
    }


def test_a_stored_contexts_trace_id_is_opentelemetrys_else_sentrys() -> None:
    otel = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    sentry_trace = "771a43a4192642f0b136d5159a501700-b7ad6b7169203331-1"
    both = f'{{"sentry-trace": "{sentry_trace}", "traceparent": "{otel}"}}'
    assert tracing.trace_id(both) == "0af7651916cd43dd8448eb211c80319c"
    assert tracing.trace_id(f'{{"sentry-trace": "{sentry_trace}"}}') == (
        "771a43a4192642f0b136d5159a501700"
    )
    unsampled = '{"sentry-trace": "771a43a4192642f0b136d5159a501700-b7ad6b7169203331"}'
    assert tracing.trace_id(unsampled) == "771a43a4192642f0b136d5159a501700"
    for unreadable in ("", "not json", "[1]", '{"sentry-trace": "short-b7ad6b7169203331-1"}'):
        assert tracing.trace_id(unreadable) == ""
