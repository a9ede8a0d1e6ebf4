"""Without the ``otel`` extra the package imports, and tracing is off: nothing of
OpenTelemetry is imported, and every tracing call is a no-op."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

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
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=REPO,
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
