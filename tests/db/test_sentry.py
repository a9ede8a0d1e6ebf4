"""Sentry, as its Celery integration gives it (issue 34, item 8): a real worker on
PostgreSQL runs a job that fails until it is dead; the SDK, initialised with an
in-memory transport (the SDK's ``Transport`` API, capturing each envelope), receives one
event per failed run with the job's tags, the dead run marked, and with tracing on one
transaction per run (SDK 2.x) or one segment span per run (3.x, which has no
transactions): the tests read either. A run that completes or pauses sends no event. A
run given up on past its hard limit (its thread abandoned, or its process-pool child
killed) is one failed run's event too, sent by the worker that settles it; what the
abandoned run comes to later sends nothing."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sentry_sdk")

import sentry_sdk
from sentry_sdk.envelope import Envelope
from sentry_sdk.integrations.logging import LoggingIntegration
from sentry_sdk.transport import Transport

from django_jobqueue import Status, tracing
from django_jobqueue.models import Job
from tests.concurrency.procs import database_url
from tests.helpers import WorkerThread, postgres_only
from tests.taskapp import logging_tasks, tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


class MemoryTransport(Transport):
    """Keeps every envelope the client sends, in memory."""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self.envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        self.envelopes.append(envelope)

    def items(self, kind: str) -> list[dict[str, Any]]:
        return [
            item.payload.json
            for envelope in self.envelopes
            for item in envelope.items
            if item.type == kind and item.payload.json is not None
        ]

    def runs(self) -> list[dict[str, Any]]:
        """Each traced run (a transaction in SDK 2.x, a segment span in 3.x), as the
        facts the tests read: name, source, op, status, trace and parent, job id."""
        if TRANSACTIONS:
            return [
                {
                    "name": t["transaction"],
                    "source": t["transaction_info"]["source"],
                    "op": t["contexts"]["trace"]["op"],
                    "status": t["contexts"]["trace"].get("status"),
                    "trace_id": t["contexts"]["trace"]["trace_id"],
                    "parent_span_id": t["contexts"]["trace"].get("parent_span_id"),
                    "job_id": t["tags"].get("jobqueue.job_id"),
                }
                for t in self.items("transaction")
            ]
        spans = [s for batch in self.items("span") for s in batch["items"] if s["is_segment"]]
        return [
            {
                "name": s["name"],
                "source": _value(s, "sentry.segment.name.source"),
                "op": _value(s, "sentry.op"),
                "status": s["status"],
                "trace_id": s["trace_id"],
                "parent_span_id": s.get("parent_span_id"),
                "job_id": _value(s, "jobqueue.job_id"),
            }
            for s in spans
        ]


# SDK 2.x reports a traced run as a transaction; 3.x has none, a run is a segment span.
TRANSACTIONS = hasattr(sentry_sdk, "start_transaction")
# The status of a failed run's transaction (2.x) or span (3.x).
FAILED = "internal_error" if TRANSACTIONS else "error"


def _ours(mechanism: dict[str, Any]) -> bool:
    """Whether an exception's mechanism is ours, unhandled (3.x adds its ``exception_id``)."""
    return mechanism["type"] == "django_jobqueue" and mechanism["handled"] is False


def _value(span: dict[str, Any], attribute: str) -> Any:
    found = span["attributes"].get(attribute)
    return None if found is None else found["value"]


def _request() -> Any:
    """A request's root span, as the SDK of either generation starts one."""
    if TRANSACTIONS:
        return sentry_sdk.start_transaction(op="http.server", name="POST /orders")
    return sentry_sdk.start_span(name="POST /orders", attributes={"sentry.op": "http.server"})


def _child(name: str) -> Any:
    if TRANSACTIONS:
        return sentry_sdk.start_span(op=name)
    return sentry_sdk.start_span(name=name)


@pytest.fixture
def sentry() -> Iterator[Callable[..., MemoryTransport]]:
    """Initialise the SDK for this test (``traces_sample_rate``: tracing on), as an
    application does; reset after it."""

    def init(traces_sample_rate: float | None = None) -> MemoryTransport:
        transport = MemoryTransport()
        sentry_sdk.init(
            dsn="https://public@sentry.example.com/1",
            transport=transport,
            traces_sample_rate=traces_sample_rate,
            # Only the logging integration (breadcrumbs): the others patch Django and
            # threading for the rest of the process, and would add their frames to the
            # tracebacks the next tests read.
            default_integrations=False,
            auto_enabling_integrations=False,
            integrations=[LoggingIntegration()],
        )
        return transport

    yield init
    client = sentry_sdk.get_client()
    client.close()
    sentry_sdk.get_global_scope().set_client(None)


def _settled(ids: list[Any], statuses: set[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if set(Job.objects.filter(id__in=ids).values_list("status", flat=True)) <= statuses:
            return
        time.sleep(0.1)
    raise AssertionError(f"not settled: {list(Job.objects.values('id', 'status'))}")


def test_each_failed_run_is_one_event_with_the_jobs_tags_and_the_dead_one_marked(
    sentry: Callable[..., MemoryTransport], worker_thread: Callable[..., WorkerThread]
) -> None:
    transport = sentry()
    failing = logging_tasks.chatty.enqueue(lines=1, fail=True)
    fine = logging_tasks.chatty.enqueue(lines=1)
    paused = tasks.paginate.enqueue(pages=2)
    worker = worker_thread(
        kinds=[logging_tasks.chatty.kind, tasks.paginate.kind], worker_id="sentry-test:1"
    )
    _settled([failing.id, fine.id, paused.id], {Status.DEAD, Status.COMPLETED})
    worker.stop()
    sentry_sdk.flush()
    assert Job.objects.get(id=failing.id).status == Status.DEAD
    events = transport.items("event")
    # One per failed run (max_failures=3); nothing for the completed or paused runs.
    assert len(events) == 3
    by_attempt = {e["tags"]["jobqueue.attempt"]: e for e in events}
    assert sorted(by_attempt) == ["1", "2", "3"]
    for attempt, event in by_attempt.items():
        tags = event["tags"]
        assert tags["jobqueue.kind"] == logging_tasks.chatty.kind
        assert tags["jobqueue.job_id"] == str(failing.id)
        assert tags["jobqueue.queue"] == "default"
        assert tags["jobqueue.workflow"] == "none"
        assert event["contexts"]["jobqueue"]["jobqueue.worker"] == "sentry-test:1"
        [exception] = event["exception"]["values"]
        assert exception["type"] == "RuntimeError"
        assert exception["value"] == f"chatty failed in run {attempt}"
        assert _ours(exception["mechanism"])
        assert event["fingerprint"] == [
            "{{ default }}",
            "django_jobqueue",
            logging_tasks.chatty.kind,
        ]
    assert [by_attempt[a]["tags"]["jobqueue.outcome"] for a in "123"] == [
        "retried",
        "retried",
        "dead",
    ]
    assert [by_attempt[a]["level"] for a in "123"] == ["error", "error", "fatal"]
    assert by_attempt["3"]["tags"]["jobqueue.dead"] == "yes"
    assert "jobqueue.dead" not in by_attempt["1"]["tags"]
    # Each run's scope is its own: the run's log lines are its breadcrumbs, no other's.
    crumbs = [c["message"] for c in by_attempt["2"]["breadcrumbs"]["values"]]
    assert f"run 2 line 0 of job {failing.id}" in crumbs
    assert not any("run 1 " in m for m in crumbs if m)
    assert transport.runs() == []  # tracing is off


def test_with_tracing_on_each_run_is_a_transaction_named_by_its_kind(
    sentry: Callable[..., MemoryTransport], worker_thread: Callable[..., WorkerThread]
) -> None:
    transport = sentry(traces_sample_rate=1.0)
    failing = logging_tasks.chatty.enqueue(lines=1, fail=True)
    fine = logging_tasks.chatty.enqueue(lines=1)
    worker = worker_thread(kinds=[logging_tasks.chatty.kind])
    _settled([failing.id, fine.id], {Status.DEAD, Status.COMPLETED})
    worker.stop()
    sentry_sdk.flush()
    runs = transport.runs()
    assert len(runs) == 4  # three failed runs and one completed
    for run in runs:
        assert run["name"] == logging_tasks.chatty.kind
        assert run["source"] == "task"
        assert run["op"] == "queue.task"
    statuses = sorted((run["job_id"], run["status"]) for run in runs)
    assert statuses == sorted([(str(failing.id), FAILED)] * 3 + [(str(fine.id), "ok")])
    events = transport.items("event")
    assert len(events) == 3
    # An event is in its run's trace.
    traces = {run["trace_id"] for run in runs}
    assert {e["contexts"]["trace"]["trace_id"] for e in events} <= traces


def _timed_out_events(transport: MemoryTransport, job_id: Any, kind: str) -> list[dict[str, Any]]:
    """The events of a job whose every run timed out, checked for what they all say; in
    the order of their runs."""
    events = sorted(transport.items("event"), key=lambda e: e["tags"]["jobqueue.attempt"])
    for event in events:
        assert event["tags"]["jobqueue.kind"] == kind
        assert event["tags"]["jobqueue.job_id"] == str(job_id)
        [exception] = event["exception"]["values"]
        assert exception["type"] == "TimedOut"
        assert exception["value"].startswith("timed out after "), exception
        assert _ours(exception["mechanism"])
        assert event["fingerprint"] == ["{{ default }}", "django_jobqueue", kind]
    return events


def test_a_run_past_its_timeout_is_one_failed_runs_event_and_its_own_late_failure_none(
    sentry: Callable[..., MemoryTransport], worker_thread: Callable[..., WorkerThread]
) -> None:
    transport = sentry()
    kind = logging_tasks.overruns_then_fails.kind
    handle = logging_tasks.overruns_then_fails.enqueue()
    worker = worker_thread(kinds=[kind], worker_id="sentry-test:2")
    _settled([handle.id], {Status.DEAD})
    # Each abandoned run raises once the worker gave up on it; its thread ends after its
    # own (dropped) ending, which must have sent nothing.
    threads = logging_tasks.RAN_ON[str(handle.id)]
    assert len(threads) == 2
    for thread in threads:
        thread.join(30)
        assert not thread.is_alive()
    worker.stop()
    sentry_sdk.flush()
    events = _timed_out_events(transport, handle.id, kind)
    assert [e["tags"]["jobqueue.attempt"] for e in events] == ["1", "2"]
    assert [e["tags"]["jobqueue.outcome"] for e in events] == ["retried", "dead"]
    assert [e["level"] for e in events] == ["error", "fatal"]
    assert events[1]["tags"]["jobqueue.dead"] == "yes"
    assert "(the task's timeout)" in events[0]["exception"]["values"][0]["value"]
    assert events[0]["contexts"]["jobqueue"]["jobqueue.worker"] == "sentry-test:2"


def test_a_run_killed_at_its_time_limit_on_the_process_pool_is_a_failed_runs_event(
    sentry: Callable[..., MemoryTransport],
    worker_thread: Callable[..., WorkerThread],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    transport = sentry()
    # The pool's children are new interpreters: they find the test database by this.
    monkeypatch.setenv("DATABASE_URL", database_url())
    handle = tasks.runaway.enqueue(marker=str(tmp_path / "soft-limit-raised"))
    worker = worker_thread(kinds=[tasks.runaway.kind], pool="process", concurrency=1)
    _settled([handle.id], {Status.DEAD})
    worker.stop()
    sentry_sdk.flush()
    [event] = _timed_out_events(transport, handle.id, tasks.runaway.kind)
    assert event["tags"]["jobqueue.outcome"] == "dead"
    assert event["level"] == "fatal"
    note = event["exception"]["values"][0]["value"]
    assert "(the task's time_limit)" in note, note
    assert "process-pool child" in note, note
    assert "killed" in note, note


def test_each_run_continues_the_trace_its_job_was_enqueued_in(
    sentry: Callable[..., MemoryTransport], worker_thread: Callable[..., WorkerThread]
) -> None:
    """With tracing on, the run's transaction is a child of the enqueuing span, on every
    attempt (as Celery's integration continues a task's trace), and its events are in
    that trace."""
    transport = sentry(traces_sample_rate=1.0)
    with _request() as request, _child("enqueue") as enqueuing:
        failing = logging_tasks.chatty.enqueue(lines=1, fail=True)
    stored = Job.objects.get(id=failing.id).trace_context
    assert tracing.trace_id(stored) == request.trace_id
    worker = worker_thread(kinds=[logging_tasks.chatty.kind])
    _settled([failing.id], {Status.DEAD})
    worker.stop()
    sentry_sdk.flush()
    runs = [run for run in transport.runs() if run["name"] != "POST /orders"]
    assert len(runs) == 3  # max_failures=3: every attempt continues the same trace
    for run in runs:
        assert run["trace_id"] == request.trace_id
        assert run["parent_span_id"] == enqueuing.span_id
    events = transport.items("event")
    assert len(events) == 3
    assert {e["contexts"]["trace"]["trace_id"] for e in events} == {request.trace_id}


def test_with_tracing_off_a_runs_events_are_in_the_enqueuers_trace(
    sentry: Callable[..., MemoryTransport], worker_thread: Callable[..., WorkerThread]
) -> None:
    """Without a transaction, the enqueuing scope's trace (its propagation context) is
    kept and continued: the run's error events are linked to the enqueuer's."""
    transport = sentry()
    enqueuer = sentry_sdk.get_traceparent()
    assert enqueuer
    failing = logging_tasks.chatty.enqueue(lines=1, fail=True)
    worker = worker_thread(kinds=[logging_tasks.chatty.kind])
    _settled([failing.id], {Status.DEAD})
    worker.stop()
    sentry_sdk.flush()
    events = transport.items("event")
    assert len(events) == 3
    assert {e["contexts"]["trace"]["trace_id"] for e in events} == {enqueuer.split("-")[0]}


def test_an_sdk_that_fails_costs_the_report_never_the_run(
    sentry: Callable[..., MemoryTransport],
    worker_thread: Callable[..., WorkerThread],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An SDK whose API changed under us (3.0 removed what 2.x runs were made of) or that
    raises: each run goes on unreported and settles, the enqueue too, and the worker
    says why; a slot that died on it would have left its job claimed until its lease
    ran out."""
    transport = sentry(traces_sample_rate=1.0)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("continue_trace() got an unexpected keyword argument 'op'")

    monkeypatch.setattr(sentry_sdk, "continue_trace", broken)
    monkeypatch.setattr(sentry_sdk, "get_baggage", broken)
    failing = logging_tasks.chatty.enqueue(lines=1, fail=True)
    fine = logging_tasks.chatty.enqueue(lines=1)
    worker = worker_thread(kinds=[logging_tasks.chatty.kind])
    _settled([failing.id, fine.id], {Status.DEAD, Status.COMPLETED})
    worker.stop()
    assert Job.objects.get(id=fine.id).status == Status.COMPLETED
    assert Job.objects.get(id=failing.id).status == Status.DEAD
    sentry_sdk.flush()
    assert transport.items("event") == []
    assert transport.runs() == []
    said = [r.getMessage() for r in caplog.records if r.name == "django_jobqueue"]
    assert "Sentry: reading the enqueuer's trace failed; the queue goes on without it" in said
    assert "Sentry: opening a run's scope failed; the queue goes on without it" in said


def test_an_sdk_that_fails_closing_a_runs_scope_leaves_the_run_completed(
    sentry: Callable[..., MemoryTransport],
    worker_thread: Callable[..., WorkerThread],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The scope's end failing (a span's send, say) after the run completed: the run
    stays completed, once; a failure there would have had it run again."""
    sentry()
    real = sentry_sdk.isolation_scope

    @contextlib.contextmanager
    def failing_on_exit() -> Iterator[Any]:
        with real() as scope:
            yield scope
        raise RuntimeError("the transport broke")

    monkeypatch.setattr(sentry_sdk, "isolation_scope", failing_on_exit)
    fine = logging_tasks.chatty.enqueue(lines=1)
    worker = worker_thread(kinds=[logging_tasks.chatty.kind])
    _settled([fine.id], {Status.COMPLETED})
    worker.stop()
    assert Job.objects.get(id=fine.id).run_count == 1
    said = [r.getMessage() for r in caplog.records if r.name == "django_jobqueue"]
    assert "Sentry: closing a run's scope failed; the queue goes on without it" in said
