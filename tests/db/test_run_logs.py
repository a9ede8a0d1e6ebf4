"""Each run's own log lines (issue 34, item 5): captured per run, bounded per run and per
job, written with the settlement only when its guard lets it through, redacted when
shown, and deleted with the job. On PostgreSQL, SQLite and MariaDB."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from django_jobqueue import chain, conf, store
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.models import Job, RunLog, Status
from django_jobqueue.redaction import MARK
from django_jobqueue.rules.lifecycle import Run, completed
from django_jobqueue.run.logs import Captured
from django_jobqueue.testing import run_jobs
from tests.helpers import WorkerThread
from tests.taskapp import logging_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

MODULE = logging_tasks.__name__


def jobqueue(**changes: Any) -> Any:
    """override_settings of JOBQUEUE with ``changes`` on top of the test settings'."""
    from django.conf import settings

    return override_settings(JOBQUEUE={**getattr(settings, "JOBQUEUE", {}), **changes})


def messages(job_id: Any, run_no: int | None = None) -> list[str]:
    runs = store.run_logs(job_id=job_id)
    return [line["message"] for r in runs if run_no in (None, r.run_no) for line in r.lines]


def test_a_run_keeps_its_module_loggers_and_ctx_loggers_lines_at_info_and_above() -> None:
    handle = logging_tasks.chatty.enqueue(lines=2)
    run_jobs(kinds=[logging_tasks.chatty])
    [run] = store.run_logs(job_id=handle.id)
    assert run.run_no == 1
    assert run.dropped == 0
    assert [(line["level"], line["logger"]) for line in run.lines] == [
        ("INFO", MODULE),
        ("INFO", MODULE),
        ("WARNING", f"django_jobqueue.task.{logging_tasks.chatty.kind}"),
    ]
    assert run.lines[0]["message"] == f"run 1 line 0 of job {handle.id}"
    assert run.lines[2]["message"] == "warned in run 1"
    assert run.shown()[0].at is not None


def test_each_failed_run_keeps_its_own_lines_newest_run_first() -> None:
    handle = logging_tasks.chatty.enqueue(lines=1, fail=True)
    later = timezone.now() + timedelta(days=1)
    for _ in range(3):  # the third failure makes it dead (max_failures=3)
        run_jobs(kinds=[logging_tasks.chatty], now=later)
        later += timedelta(days=1)
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    runs = store.run_logs(job_id=handle.id)
    assert [r.run_no for r in runs] == [3, 2, 1]
    assert messages(handle.id, 2) == [f"run 2 line 0 of job {handle.id}", "warned in run 2"]


def test_lines_past_the_bound_keep_the_first_and_last_halves_and_count_the_rest() -> None:
    with jobqueue(RUN_LOGS_MAX_LINES=4):
        handle = logging_tasks.chatty.enqueue(lines=10)
        run_jobs(kinds=[logging_tasks.chatty])
    [run] = store.run_logs(job_id=handle.id)
    # 11 lines logged (10 and ctx.logger's): the first 2, the last 2, 7 dropped between.
    assert [line["message"] for line in run.lines] == [
        f"run 1 line 0 of job {handle.id}",
        f"run 1 line 1 of job {handle.id}",
        f"run 1 line 9 of job {handle.id}",
        "warned in run 1",
    ]
    assert run.dropped == 7


def test_a_long_line_is_cut() -> None:
    with jobqueue(RUN_LOGS_LOGGERS=[MODULE]):
        handle = logging_tasks.chatty.enqueue(lines=0, secret="x" * 2100)
        run_jobs(kinds=[logging_tasks.chatty])
    [line] = store.run_logs(job_id=handle.id)[0].lines
    kept, _, marker = line["message"].partition("\n")
    assert len(kept) == 2000
    assert marker == "... (127 more characters cut)"


def test_only_the_last_runs_of_a_job_keep_their_lines() -> None:
    with jobqueue(RUN_LOGS_RUNS=2):
        handle = logging_tasks.chatty.enqueue(lines=1, fail=True)
        later = timezone.now() + timedelta(days=1)
        for _ in range(3):
            run_jobs(kinds=[logging_tasks.chatty], now=later)
            later += timedelta(days=1)
    assert [r.run_no for r in store.run_logs(job_id=handle.id)] == [3, 2]
    assert RunLog.objects.filter(job_id=handle.id).count() == 2


def test_the_level_and_the_loggers_are_settings_and_none_turns_capture_off() -> None:
    with jobqueue(RUN_LOGS="WARNING"):
        warned = logging_tasks.chatty.enqueue(lines=2)
        run_jobs(kinds=[logging_tasks.chatty])
    assert messages(warned.id) == ["warned in run 1"]
    with jobqueue(RUN_LOGS_LOGGERS=["tests.elsewhere"]):
        other = logging_tasks.chatty.enqueue(lines=2)
        run_jobs(kinds=[logging_tasks.chatty])
    assert messages(other.id) == ["a line of another logger"]
    with jobqueue(RUN_LOGS=None):
        off = logging_tasks.chatty.enqueue(lines=2)
        run_jobs(kinds=[logging_tasks.chatty])
    assert not RunLog.objects.filter(job_id=off.id).exists()


def test_a_run_that_logs_nothing_writes_no_row() -> None:
    with jobqueue(RUN_LOGS_LOGGERS=["tests.nobody"]):
        handle = logging_tasks.chatty.enqueue(lines=2)
        run_jobs(kinds=[logging_tasks.chatty])
    assert not RunLog.objects.filter(job_id=handle.id).exists()


def _claimed(worker: str) -> Job:
    job = Job.objects.create(
        kind=logging_tasks.chatty.kind,
        status=Status.CLAIMED,
        claimed_by=worker,
        run_count=1,
        claim_expires_at=timezone.now() + timedelta(minutes=1),
    )
    return job


def _settlement(job: Job, worker: str) -> Any:
    lines = ({"at": time.time(), "level": "INFO", "logger": "x", "message": "hi"},)
    run = Run(job_id=job.id, kind=job.kind, run_no=1, worker=worker, logs=Captured(lines))
    return completed(run, result=None)


def test_lines_are_written_only_when_the_settlements_guard_lets_it_through() -> None:
    job = _claimed("w:1")
    [applied] = store.settle(worker_id="w:2", settlements=[_settlement(job, "w:2")])
    assert not applied
    assert not RunLog.objects.filter(job_id=job.id).exists()
    [applied] = store.settle(worker_id="w:1", settlements=[_settlement(job, "w:1")])
    assert applied
    assert messages(job.id) == ["hi"]


def test_a_turns_settlement_writes_the_lines_with_it() -> None:
    job = _claimed("w:1")
    request = store.ClaimRequest(limit=1, kinds=["tests.nothing"], leases={})
    applied, claimed = store.exchange(
        worker_id="w:1", settlements=[_settlement(job, "w:1")], request=request
    )
    assert list(applied) == [True]
    assert claimed == []
    assert messages(job.id) == ["hi"]


def test_show_logs_prints_each_runs_lines_redacted_newest_first() -> None:
    handle = logging_tasks.chatty.enqueue(lines=1, fail=True, secret="s3cr3t-value")
    run_jobs(kinds=[logging_tasks.chatty], now=timezone.now() + timedelta(days=1))  # 3 runs
    out = StringIO()
    call_command("jobqueue", "show", str(handle.id), "--logs", stdout=out)
    text = out.getvalue()
    assert "s3cr3t-value" not in text
    assert f"calling the API with token={MARK}" in text
    assert text.index("Logs of run 3 (3 lines)") < text.index("Logs of run 1 (3 lines)")
    assert f"INFO     {MODULE}: run 2 line 0 of job {handle.id}" in text
    # stored as logged: the redaction is at display time, as a note's
    assert "calling the API with token=s3cr3t-value" in messages(handle.id, 1)
    plain = StringIO()
    call_command("jobqueue", "show", str(handle.id), stdout=plain)
    assert "Logs of run" not in plain.getvalue()


def test_show_logs_says_when_no_lines_are_kept() -> None:
    handle = logging_tasks.chatty.enqueue(lines=1)
    out = StringIO()
    call_command("jobqueue", "show", str(handle.id), "--logs", stdout=out)
    assert "Logs: none kept" in out.getvalue()


def test_cleanup_and_deleting_a_job_remove_its_lines() -> None:
    first = logging_tasks.chatty.enqueue(lines=1)
    second = logging_tasks.chatty.enqueue(lines=1)
    dead = logging_tasks.chatty.enqueue(lines=1, fail=True)
    run_jobs(kinds=[logging_tasks.chatty], now=timezone.now() + timedelta(days=1))
    assert Job.objects.get(id=dead.id).status == Status.DEAD
    assert RunLog.objects.filter(job_id__in=[first.id, second.id]).count() == 2
    assert RunLog.objects.filter(job_id=dead.id).count() == 3
    cut = timezone.now() + timedelta(seconds=1)
    assert store.cleanup(finished_before=cut, status="completed") == 2
    assert not RunLog.objects.filter(job_id__in=[first.id, second.id]).exists()
    assert RunLog.objects.filter(job_id=dead.id).count() == 3
    assert store.delete_finished(job_ids=[dead.id]) == [dead.id]
    assert not RunLog.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_runs_on_slot_threads_at_once_keep_only_their_own_lines(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    """Three runs on three slot threads of one worker, each logging, waiting until all
    three logged, and logging again: each keeps its two lines and none of the others'."""
    key = uuid.uuid4().hex
    logging_tasks.BARRIERS[key] = threading.Barrier(3)
    handles = [logging_tasks.interleaved.enqueue(tag=f"t{n}", barrier_key=key) for n in range(3)]
    worker_thread(kinds=[logging_tasks.interleaved.kind], concurrency=3)
    _wait_settled([h.id for h in handles])
    for n, handle in enumerate(handles):
        assert Job.objects.get(id=handle.id).status == Status.COMPLETED
        assert messages(handle.id) == [f"first t{n}", f"second t{n}"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_async_runs_on_the_event_loop_keep_only_their_own_lines(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handles = [logging_tasks.async_interleaved.enqueue(tag=f"a{n}") for n in range(3)]
    worker_thread(kinds=[logging_tasks.async_interleaved.kind])
    _wait_settled([h.id for h in handles])
    for n, handle in enumerate(handles):
        assert Job.objects.get(id=handle.id).status == Status.COMPLETED
        assert messages(handle.id) == [f"first a{n}", f"from a thread a{n}", f"second a{n}"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_run_past_its_timeout_is_settled_with_its_lines_so_far(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    handle = logging_tasks.overruns.enqueue()
    worker_thread(kinds=[logging_tasks.overruns.kind])
    _wait_settled([handle.id], status=Status.DEAD)
    assert messages(handle.id) == ["before the wait"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_run_released_at_shutdown_keeps_its_lines_so_far(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    key = uuid.uuid4().hex
    logging_tasks.LOGGED[key] = threading.Event()
    logging_tasks.HOLD[key] = hold = threading.Event()
    handle = logging_tasks.logs_then_waits.enqueue(key=key)
    worker = worker_thread(kinds=[logging_tasks.logs_then_waits.kind], shutdown_timeout=0.2)
    assert logging_tasks.LOGGED[key].wait(60)
    try:
        worker.stop()
    finally:
        hold.set()
    assert Job.objects.get(id=handle.id).status == Status.PENDING
    assert messages(handle.id) == ["logged before the release"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_workflow_steps_settled_by_a_worker_keep_their_lines(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    """A chain's steps complete in turns that release their dependents (on PostgreSQL,
    in the turn's one statement): each step keeps its own lines."""
    handle = chain(logging_tasks.chatty.s(lines=1), logging_tasks.chatty.s(lines=2)).enqueue()
    worker_thread(kinds=[logging_tasks.chatty.kind])
    ids = list(
        Job.objects.filter(workflow_id=handle.id)
        .order_by("created_at", "id")
        .values_list("id", flat=True)
    )
    assert len(ids) == 2
    _wait_settled(ids)
    assert [len(messages(i)) for i in ids] == [2, 3]
    assert messages(ids[1])[1] == f"run 1 line 1 of job {ids[1]}"


def _wait_settled(ids: list[Any], timeout: float = 90, status: str = Status.COMPLETED) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Job.objects.filter(id__in=ids).exclude(status=status).exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"not settled in {timeout} s: {list(Job.objects.values('status'))}")


def test_the_settings_are_checked_and_named() -> None:
    for key, value in (
        ("RUN_LOGS", "LOUD"),
        ("RUN_LOGS", True),
        ("RUN_LOGS_LOGGERS", "django"),
        ("RUN_LOGS_MAX_LINES", 0),
        ("RUN_LOGS_RUNS", None),
    ):
        with pytest.raises(ConfigurationError, match=key):
            conf.validate({key: value})
    assert conf.validate({"RUN_LOGS": "debug"}).run_logs == 10
    assert conf.validate({"RUN_LOGS": None}).run_logs is None
