"""PostgreSQL statements in the server's own marks (``$1``…), made once per text for
psycopg's ``RawCursor``; anything else is left to psycopg's own conversion."""

from __future__ import annotations

import pytest

from django_jobqueue.store.dialects.postgresql import numbered


def test_each_placeholder_becomes_its_number_and_a_doubled_percent_one_percent() -> None:
    found = numbered("SELECT %s, %s FROM t WHERE n LIKE 'a%%' AND m = %s", 3)
    assert found == "SELECT $1, $2 FROM t WHERE n LIKE 'a%' AND m = $3"


def test_a_statement_without_parameters_is_kept() -> None:
    assert numbered("SET plan_cache_mode = force_generic_plan", 0) == (
        "SET plan_cache_mode = force_generic_plan"
    )


@pytest.mark.parametrize(
    ("statement", "count"),
    [
        ("SELECT %(name)s", 1),  # named: psycopg's to convert
        ("SELECT %b", 1),  # a binary mark: psycopg's to convert
        ("SELECT %s, $1", 1),  # a $ already in it: its meaning would change
        ("SELECT 'a$b', %s", 1),
        ("SELECT %s", 2),  # a count that does not match: psycopg says so
        ("SELECT %s, %s", 1),
        ("SELECT 50% off", 0),  # a lone percent: psycopg's error, not ours
    ],
)
def test_what_is_not_plain_positional_marks_is_left_to_psycopg(statement: str, count: int) -> None:
    assert numbered(statement, count) is None
