"""Without ``sentry_sdk.init`` (or without the SDK), a run reports nothing to Sentry and
``running`` gives no report: the one check each run pays; an enqueue keeps no Sentry
trace headers."""

from __future__ import annotations

import subprocess
import sys
import uuid
from types import SimpleNamespace

import pytest

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


def test_the_sdk_is_not_imported_until_the_application_imports_it() -> None:
    """A worker whose application never imported ``sentry_sdk`` (so never called its
    ``init``) does not import it either (about 19 MiB a process); once the application
    has, its client is asked, and an SDK imported but not initialised reports nothing."""
    pytest.importorskip("sentry_sdk")
    code = (
        "import sys\n"
        "from django_jobqueue import sentry, tracing\n"
        "assert not sentry.active() and 'sentry_sdk' not in sys.modules\n"
        "assert sentry.trace_headers() == {} and 'sentry_sdk' not in sys.modules\n"
        "import sentry_sdk\n"
        "assert not sentry.active() and sentry.sentry_sdk is sentry_sdk\n"
        "sentry_sdk.init(dsn='https://public@sentry.example.com/1', default_integrations=False)\n"
        "assert sentry.active()\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
