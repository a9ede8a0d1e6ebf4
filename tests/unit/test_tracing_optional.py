"""Without the ``otel`` extra the package imports, and tracing is off: nothing of
OpenTelemetry is imported, and every tracing call is a no-op. With it, nothing is
imported either until the application imports OpenTelemetry or names a provider in the
environment; then the very next check traces."""

from __future__ import annotations

import textwrap

import pytest

from tests.helpers import run_program

PROGRAM = textwrap.dedent(
    """
    import sys, types, uuid
    sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
    import django
    django.setup()
    import django_jobqueue.tracing as tracing
    from django_jobqueue.run.pipeline import Pipeline  # the run's path imports it too
    assert tracing.trace is None
    assert not tracing.active()
    assert tracing.capture_context() == ""
    with tracing.enqueue_span(kind="k", queue="q") as span:
        assert span is None
    job = types.SimpleNamespace(id=uuid.uuid4(), kind="k", queue="q", run_count=2,
                                trace_context='{"traceparent": "x"}')
    span = tracing.start_run(job, worker_id="w")
    assert span is None
    with tracing.current(span):
        pass
    tracing.ran(span, end="failed", error=ValueError("x"))
    tracing.settled(span, outcome="retried", applied=True)
    assert not [m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m]]
    print("ok")
    """
)


def test_tracing_is_off_and_imports_nothing_without_the_otel_extra() -> None:
    _run(PROGRAM)


INSTALLED_UNUSED = textwrap.dedent(
    """
    import sys
    import django
    django.setup()
    import django_jobqueue.tracing as tracing
    from django_jobqueue.run.pipeline import Pipeline  # the run's path imports it too
    assert not tracing.active()
    assert tracing.capture_context() == ""
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
    assert not loaded, loaded  # installed, but this process traces nothing
    # The application configures tracing afterwards: the very next check sees it.
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
    assert tracing.active()
    with tracing.enqueue_span(kind="k", queue="q") as span:
        assert span is not None and span.is_recording()
        assert '"traceparent"' in tracing.capture_context()
    print("ok")
    """
)

FROM_ENVIRONMENT = textwrap.dedent(
    """
    import django
    django.setup()
    import django_jobqueue.tracing as tracing
    assert tracing.active()  # the API imported, and the provider it names loaded
    print("ok")
    """
)


def _run(program: str, **env: str) -> None:
    run_program(program, DJANGO_SETTINGS_MODULE="tests.settings", **env)


def test_with_the_extra_installed_nothing_is_imported_until_the_application_traces() -> None:
    pytest.importorskip("opentelemetry.sdk.trace")
    _run(INSTALLED_UNUSED)


def test_a_provider_named_in_the_environment_is_used_without_an_import() -> None:
    pytest.importorskip("opentelemetry.sdk.trace")
    _run(FROM_ENVIRONMENT, OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider")
