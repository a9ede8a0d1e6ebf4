"""Every run starts on a clean connection: a transaction, a session setting or a broken
connection that one run leaves behind never reaches the next run on its slot thread.

One slot (concurrency 1), so the job after the misbehaving one runs on the same thread and
the same connections. What persisted is read from the test's own session, after the
worker has stopped: a write lost in an uncommitted transaction is gone by then.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import connection

from django_jobqueue import Status
from django_jobqueue.models import Job
from tests.helpers import is_mysql, is_postgres, journal_of, row_locking, run_burst
from tests.taskapp import tasks
from tests.taskapp.models import Effect

pytestmark = [pytest.mark.django_db(transaction=True)]


def effects(job_id: Any) -> list[int]:
    return sorted(Effect.objects.filter(job_id=job_id).values_list("run_no", flat=True))


def outcomes(job_id: Any) -> list[tuple[int, str]]:
    return [(e.run_no, e.outcome) for e in journal_of(job_id)]


def assert_no_completion_lost(*job_ids: Any) -> None:
    """Every job journalled completed kept its writes (one Effect row per such job)."""
    for job_id in job_ids:
        if any(outcome == "completed" for _, outcome in outcomes(job_id)):
            assert effects(job_id), f"job {job_id} is journalled completed, its write is gone"


@pytest.mark.sqlite
@pytest.mark.parametrize("how", ["autocommit", "atomic", "settle_now"])
def test_a_run_that_leaves_a_transaction_open_fails_and_the_next_write_persists(
    how: str,
) -> None:
    leak = tasks.leaks.enqueue(how=how)
    later = tasks.writes.enqueue()
    run_burst(concurrency=1)

    assert outcomes(later.id) == [(1, "completed")]
    assert effects(later.id) == [1]
    # The leaking run is the failed one (dead: max_failures=1), its write rolled back.
    assert Job.objects.get(id=leak.id).status == Status.DEAD
    [entry] = journal_of(leak.id)
    assert entry.outcome == "dead"
    assert "left a transaction open on 'default'" in entry.note
    assert "its uncommitted writes were rolled back" in entry.note
    assert effects(leak.id) == []
    assert_no_completion_lost(leak.id, later.id)


@pytest.mark.sqlite
def test_an_atomic_run_that_leaks_an_inner_block_fails_and_the_next_atomic_run_commits() -> None:
    leak = tasks.atomic_leaks.enqueue()
    later = tasks.atomic_effect.enqueue()
    run_burst(concurrency=1)

    [entry] = journal_of(leak.id)
    assert entry.outcome == "dead"
    assert "left a transaction open on 'default' (an atomic block" in entry.note
    assert effects(leak.id) == []
    assert outcomes(later.id) == [(1, "completed")]
    assert effects(later.id) == [1]
    assert_no_completion_lost(leak.id, later.id)


def _session_cases() -> list[Any]:
    if is_postgres():
        read = "SELECT current_setting('{}')"
        return [
            pytest.param("SET search_path TO nowhere", read.format("search_path"), id="path"),
            pytest.param(
                "SELECT set_config('search_path', 'nowhere', false)",
                read.format("search_path"),
                id="set_config",
            ),
            pytest.param(
                "SET TIME ZONE 'Pacific/Kiritimati'", read.format("TimeZone"), id="timezone"
            ),
            pytest.param(
                "SET statement_timeout = '1s'", read.format("statement_timeout"), id="timeout"
            ),
            pytest.param(
                "/* a comment first */ SET search_path TO nowhere",
                read.format("search_path"),
                id="commented",
            ),
        ]
    if is_mysql():
        return [
            pytest.param(
                "SET SESSION time_zone = '+05:00'", "SELECT @@session.time_zone", id="timezone"
            ),
            pytest.param(
                "SET SESSION sql_mode = 'ANSI_QUOTES'", "SELECT @@session.sql_mode", id="sql_mode"
            ),
        ]
    return [pytest.param("PRAGMA foreign_keys = OFF", "PRAGMA foreign_keys", id="pragma")]


@pytest.mark.sqlite
@pytest.mark.parametrize(("change", "read"), _session_cases())
def test_a_session_setting_a_run_changes_does_not_reach_the_next_atomic_run(
    change: str, read: str
) -> None:
    with connection.cursor() as cursor:  # a fresh session's value: what the next run must see
        cursor.execute(read)
        [expected] = cursor.fetchone() or [None]
    setter = tasks.runs_sql.enqueue(sql=change)
    reader = tasks.atomic_reads.enqueue(sql=read)
    run_burst(concurrency=1)

    assert outcomes(setter.id) == [(1, "completed")]
    job = Job.objects.get(id=reader.id)
    assert (job.status, job.result) == (Status.COMPLETED, str(expected))
    assert effects(reader.id) == [1]


@row_locking  # SQLite's is_usable() cannot tell a closed connection from an open one
def test_an_atomic_run_whose_transaction_cannot_start_is_noted_with_the_database_error() -> None:
    tasks.breaks_connection.enqueue()
    handle = tasks.atomic_effect.enqueue()
    run_burst(concurrency=1)

    [(first, failed), (second, done)] = outcomes(handle.id)
    assert (first, failed, second, done) == (1, "retried", 2, "completed")
    note = journal_of(handle.id)[0].note
    assert "the run's transaction could not start" in note
    assert "Error" in note  # the database error's class, and its message
    assert "AssertionError" not in note
    assert effects(handle.id) == [2]


@pytest.mark.sqlite
def test_a_huge_exception_message_is_logged_bounded_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 2,000,000 characters: a hundred times the bound the log lines are held to.
    handle = tasks.raises_huge.enqueue(size=2_000_000)
    with caplog.at_level(logging.DEBUG, logger="django_jobqueue"):
        run_burst(concurrency=1)
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    formatter = logging.Formatter()
    sizes = [len(formatter.format(record)) for record in caplog.records]
    raised = [r for r in caplog.records if "raised" in r.getMessage()]
    assert raised, "the task's exception is logged at DEBUG"
    assert "RuntimeError: xxx" in formatter.format(raised[0])
    assert max(sizes) < 20_000, sizes
