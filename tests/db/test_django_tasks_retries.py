"""Django tasks on our workers: retries with backoff, attempts counted from 1, one
TaskError per failed attempt and one worker id per attempt."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.models import Job
from tests.djtasks import tasks
from tests.djtasks.suite import capture_signals
from tests.helpers import WorkerThread, run_burst, wait_for

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def outcomes(result_id: str) -> list[str]:
    return [e.outcome for e in store.journal(job_id=result_id)]


def test_task_failing_twice_then_succeeding_has_two_errors_and_three_worker_ids() -> None:
    result = tasks.flaky.enqueue(failures=2)
    # One attempt per worker, so each attempt's worker id is its own.
    for name in ("worker-a", "worker-b", "worker-c"):
        run_burst(worker_id=name, max_jobs=1)
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.return_value == {"attempt": 3}
    assert [e.exception_class for e in result.errors] == [RuntimeError, RuntimeError]
    assert "planned failure on attempt 1" in result.errors[0].traceback
    assert "planned failure on attempt 2" in result.errors[1].traceback
    assert result.worker_ids == ["worker-a", "worker-b", "worker-c"]
    assert result.attempts == 3
    assert outcomes(result.id) == ["retried", "retried", "completed"]
    entries = store.journal(job_id=result.id)
    assert result.started_at == entries[0].started_at
    assert result.last_attempted_at == entries[2].started_at
    assert result.enqueued_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at < result.started_at < result.last_attempted_at < result.finished_at


def test_attempt_counts_from_one_and_retried_attempts_signal_ready() -> None:
    with capture_signals() as signals:
        result = tasks.flaky.enqueue(failures=1)
        run_burst()
    result.refresh()
    assert result.return_value == {"attempt": 2}
    assert signals.of(result.id) == [
        ("enqueued", "READY", None),
        ("started", "RUNNING", None),
        # The first attempt failed and will be retried: the task is ready again.
        ("finished", "READY", RuntimeError),
        ("started", "RUNNING", None),
        ("finished", "SUCCESSFUL", None),
    ]


def test_max_attempts_ends_failed_with_one_error_per_attempt() -> None:
    result = tasks.flaky.enqueue(failures=10)
    with capture_signals() as signals:
        run_burst()
    result.refresh()
    assert result.status == "FAILED"
    assert len(result.errors) == 3
    assert result.attempts == 3
    assert outcomes(result.id) == ["retried", "retried", "dead"]
    assert [s for name, s, _ in signals.of(result.id) if name == "finished"] == [
        "READY",
        "READY",
        "FAILED",
    ]
    with pytest.raises(ValueError, match="Task failed"):
        _ = result.return_value


def test_backoff_chooses_the_delay_and_sees_the_failed_attempt() -> None:
    tasks.BACKOFF_CALLS.clear()
    before = timezone.now()
    result = tasks.retry_in_an_hour.enqueue()
    run_burst()
    result.refresh()
    assert result.status == "READY"
    assert [e.exception_class for e in result.errors] == [ConnectionError]
    assert tasks.BACKOFF_CALLS == [("ConnectionError", "FAILED", 1, 1)]
    job = Job.objects.get(id=result.id)
    assert job.failure_count == 1
    assert before + timedelta(seconds=3600) <= job.visible_at
    assert job.visible_at <= timezone.now() + timedelta(seconds=3600)
    assert outcomes(result.id) == ["retried"]


def test_backoff_returning_none_stops_retrying() -> None:
    tasks.BACKOFF_CALLS.clear()
    result = tasks.no_retry_wanted.enqueue()
    with capture_signals() as signals:
        run_burst()
    result.refresh()
    assert result.status == "FAILED"
    assert [e.exception_class for e in result.errors] == [PermissionError]
    assert tasks.BACKOFF_CALLS == [("PermissionError", "FAILED", 1, 1)]
    assert outcomes(result.id) == ["dead"]
    assert signals.of(result.id)[-1] == ("finished", "FAILED", PermissionError)
    [entry] = store.journal(job_id=result.id)
    assert "retrying will not help" in entry.note


def test_failure_is_logged_with_its_traceback_by_djangos_own_receiver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    result = tasks.fail.enqueue("logged")
    with caplog.at_level("INFO"):
        run_burst()
    records = [r for r in caplog.records if result.id in r.getMessage()]
    failed = [r for r in records if r.levelname == "ERROR"]
    assert len(failed) == 1
    assert failed[0].exc_info is not None
    assert failed[0].exc_info[0] is ValueError


def test_attempt_past_the_task_timeout_fails_with_timeout_error_and_is_retried() -> None:
    result = tasks.overruns.enqueue(seconds=3)
    worker = WorkerThread(concurrency=1, worker_id="patient")
    worker.start()
    try:
        wait_for(lambda: tasks.overruns.get_result(result.id).is_finished, timeout=30)
    finally:
        worker.stop()
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.return_value == {"attempt": 2}
    assert [e.exception_class for e in result.errors] == [TimeoutError]
    assert "timed out after 0:00:01" in result.errors[0].traceback
    assert result.worker_ids == ["patient", "patient"]
    assert outcomes(result.id) == ["retried", "completed"]
