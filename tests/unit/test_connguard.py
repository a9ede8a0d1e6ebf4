"""Which statements the slot's session watch takes for a change of session state."""

from __future__ import annotations

import timeit

import pytest

from django_jobqueue.run.connguard import changes_session


@pytest.mark.parametrize(
    "sql",
    [
        "SET search_path TO nowhere",
        "  set time zone 'UTC'",
        "SET LOCAL statement_timeout = 1",
        "RESET ALL",
        "SET ROLE reporting",
        "SELECT set_config('search_path', 'x', false)",
        "SELECT pg_catalog.SET_CONFIG('role', 'x', false)",
        "SET SESSION sql_mode = 'ANSI'",
        "PRAGMA foreign_keys = OFF",
        "SELECT 1; SET search_path TO nowhere",
        "/* why */ SET search_path TO nowhere",
        "-- why\nSET search_path TO nowhere",
    ],
)
def test_a_statement_that_changes_the_session_is_seen(sql: str) -> None:
    assert changes_session(sql)


@pytest.mark.parametrize(
    "sql",
    [
        'UPDATE "django_jobqueue_job" SET "status" = %s WHERE "id" = %s',
        "INSERT INTO t (settings) VALUES (%s)",
        "SELECT setting FROM pg_settings",
        "SAVEPOINT s1",
        "RELEASE SAVEPOINT s1",
        "SELECT 1",
        b"SET search_path TO nowhere",  # not text: not Django's, left alone
    ],
)
def test_an_ordinary_statement_is_not_taken_for_one(sql: str) -> None:
    assert not changes_session(sql)


def test_looking_costs_a_few_microseconds_at_most() -> None:
    sql = 'SELECT "t"."id", "t"."kind" FROM "t" WHERE "t"."id" = %s ORDER BY 1 LIMIT 21' * 5
    best = min(timeit.repeat(lambda: changes_session(sql), number=2000, repeat=5)) / 2000
    assert best < 20e-6, f"{best * 1e6:.1f} µs a statement"
