"""Nothing is stranded in silence: a worker warns at start of pending jobs of kinds it has
no task for and of ``--queue`` names nothing routes to (``tests/db/test_health.py``
has ``jobqueue health``'s unserved kinds; ``tests/unit/test_checks.py`` W006)."""

from __future__ import annotations

import logging

import pytest

from django_jobqueue.models import Job
from tests.helpers import SOFT_LIMIT_NOTICE, run_burst
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]


def warnings_at_start(caplog: pytest.LogCaptureFixture, **options: object) -> list[str]:
    with caplog.at_level(logging.WARNING, logger="django_jobqueue"):
        run_burst(concurrency=1, **options)
    # A worker on threads names the test app's soft-limited task at start: a warning of
    # its own, not a stranded job.
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and SOFT_LIMIT_NOTICE not in r.getMessage()
    ]


def test_pending_jobs_of_a_kind_no_task_has_are_named_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    moved = [tasks.add.enqueue(1, 1).id for _ in range(3)]
    Job.objects.filter(id__in=moved).update(kind="shop.jobs.send_receipt")  # moved, or renamed
    tasks.add.enqueue(2, 2)
    [warning] = warnings_at_start(caplog)
    assert "pending jobs of kind(s) no task is registered under here" in warning
    assert "shop.jobs.send_receipt (3)" in warning
    assert "tasks.py" in warning
    assert Job.objects.filter(kind="shop.jobs.send_receipt", status="pending").count() == 3


def test_a_queue_nothing_routes_to_and_no_job_is_in_is_named_at_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    [warning] = warnings_at_start(caplog, queues=["defualt"])
    assert warning.startswith("--queue defualt: no registered task routes to it")
    assert "did you mean default?" in warning
    # A queue only jobs use (enqueued with .using(queue=...)) is a queue to serve.
    tasks.add.using(queue="reports").enqueue(1, 1)
    caplog.clear()
    assert warnings_at_start(caplog, queues=["reports", "default"]) == []


def test_a_worker_with_nothing_stranded_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    tasks.add.enqueue(1, 1)
    assert warnings_at_start(caplog) == []
