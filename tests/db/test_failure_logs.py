"""The worker's INFO lines say why a run failed (the exception's class and the first
line of its message, redacted and bounded), the traceback is at DEBUG, and a run
handed back at shutdown is logged with how long it ran."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from django_jobqueue.run.pipeline import SUMMARY_LIMIT
from tests.helpers import WorkerThread, journal_of, run_burst, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def settled_lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    """Every ``settled …`` line logged at ``level``, one per job (a record holds a batch)."""
    return [
        line
        for record in caplog.records
        if record.name == "django_jobqueue" and record.levelno == level
        for line in record.getMessage().splitlines()
        if line.startswith("settled ")
    ]


def test_a_retried_run_is_logged_with_its_exception_class_and_first_line_redacted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handle = tasks.declined.enqueue(message="card declined for token=tok_live_123\nsecond line")
    with caplog.at_level(logging.DEBUG, logger="django_jobqueue"):
        run_burst(concurrency=1)
    # The tests' backoff is short: the burst runs the retry too, and it dies.
    retried, dead = settled_lines(caplog)
    assert f"job={handle.id} kind=tests.declined outcome=retried" in retried
    assert f"job={handle.id} kind=tests.declined outcome=dead" in dead
    for line in (retried, dead):
        assert line.endswith(" error=ConnectionRefusedError: card declined for token=********")
    raised = [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]
    assert len(raised) == 2
    assert "Traceback (most recent call last)" in raised[0]
    assert "second line" in raised[0]
    assert "tok_live_123" not in raised[0]
    # The journal keeps the exception as raised: only what is logged is redacted.
    assert "tok_live_123" in journal_of(handle.id)[-1].note


def test_a_dead_run_is_logged_with_its_reason_and_a_long_message_is_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = tasks.permanent.enqueue(reason="the address does not exist")
    long = tasks.declined.enqueue(message="x" * 5_000)
    with caplog.at_level(logging.INFO, logger="django_jobqueue"):
        run_burst(concurrency=1)
    lines = {line.split()[1]: line for line in settled_lines(caplog)}
    assert " outcome=dead " in lines[f"job={dead.id}"]
    assert lines[f"job={dead.id}"].endswith(" error=the address does not exist")
    bounded = lines[f"job={long.id}"]
    assert "outcome=dead" in bounded
    error = bounded.split(" error=", 1)[1]
    assert error.startswith("ConnectionRefusedError: xxx")
    assert len(error) == SUMMARY_LIMIT
    assert error.endswith("…")


def test_a_completed_run_is_logged_without_an_error(caplog: pytest.LogCaptureFixture) -> None:
    tasks.add.enqueue(1, 2)
    with caplog.at_level(logging.INFO, logger="django_jobqueue"):
        run_burst(concurrency=1)
    [line] = settled_lines(caplog)
    assert "outcome=completed" in line
    assert "error=" not in line


def test_a_run_released_at_shutdown_is_logged_and_journalled_with_how_long_it_ran(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handle = tasks.stubborn.enqueue(seconds=2.5)
    worker = WorkerThread(concurrency=1, shutdown_timeout=0.2)
    with caplog.at_level(logging.INFO, logger="django_jobqueue"):
        worker.start()
        try:
            wait_for(lambda: Execution.objects.filter(job_id=handle.id).exists())
            time.sleep(1.2)
        finally:
            worker.stop()
    [line] = settled_lines(caplog)
    assert "outcome=released" in line
    seconds = float(line.split("duration=")[1].split("s")[0])
    assert seconds >= 1.0  # it ran over a second; a release was logged 0.000s before
    [entry] = journal_of(handle.id)
    assert entry.outcome == "released"
    assert entry.duration is not None
    assert entry.duration >= timedelta(seconds=1)
    assert entry.started_at is not None
    assert entry.started_at < timezone.now() - timedelta(seconds=1)
