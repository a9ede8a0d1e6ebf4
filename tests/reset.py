"""A cheaper reset after a transactional test (``django_db(transaction=True)``).

Django's ``TransactionTestCase`` flushes every table after each such test: on
PostgreSQL one ``TRUNCATE`` of all of them (a new file for every table and index,
0.4-0.6 s and about 0.15 s of the server's CPU each time, on a machine like CI's),
then ``post_migrate`` writes the content types and permissions back. The suite has
some 270 such tests per PostgreSQL run and 200 on MariaDB, and most write a few rows to
a few tables.

Here the reset empties only the tables that hold rows, and leaves the content types and
permissions alone (the rows ``post_migrate`` would write back; no test deletes or
changes them), so no ``post_migrate`` is needed. Afterwards the database holds what the
full flush leaves, every other table empty, so the next test sees the same. When a
table holds many rows (a drain of thousands of jobs, a big journal), PostgreSQL gets
Django's own flush instead: ``TRUNCATE`` then costs less than ``DELETE``, and leaves no
dead rows behind to sway the plans of the tests that follow. On MariaDB/MySQL and SQLite
Django's flush is already ``DELETE``; they get it for the tables that hold rows only.
A test that asks for ``available_apps`` or ``serialized_rollback`` gets Django's reset
unchanged, as does any reset the cheap way cannot finish (a connection the test broke,
say).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.management.color import no_style
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import TransactionTestCase

# The rows post_migrate writes after a flush: kept, so that it need not run.
KEPT = frozenset({"django_content_type", "auth_permission"})
# From this many rows in a table PostgreSQL's reset is TRUNCATE (see the docstring).
MANY = 1000

_django_teardown = TransactionTestCase._fixture_teardown


def capped_counts(connection: BaseDatabaseWrapper, tables: Sequence[str]) -> dict[str, int]:
    """Each table's rows, counted up to MANY, in one statement."""
    qn = connection.ops.quote_name
    counts = [
        f"(SELECT COUNT(*) FROM (SELECT 1 FROM {qn(t)} LIMIT {MANY}) AS capped{i})"
        for i, t in enumerate(tables)
    ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(counts))
        row = cursor.fetchone()
    return dict(zip(tables, (int(n) for n in row), strict=True))


def empty_written_tables(alias: str) -> bool:
    """Empty the tables of ``alias`` that hold rows, but KEPT; False when Django's full
    flush is the better reset (PostgreSQL with a table of MANY rows or more)."""
    connection = connections[alias]
    names = connection.introspection.django_table_names(only_existing=True, include_views=False)
    tables = [t for t in names if t not in KEPT]
    counts = capped_counts(connection, tables)
    written = [t for t in tables if counts[t]]
    if not written:
        return True
    if connection.vendor != "postgresql":
        connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), written))
        return True
    if any(counts[t] >= MANY for t in written):
        return False
    qn = connection.ops.quote_name
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        # Django's foreign keys on PostgreSQL are deferrable: checked at the commit,
        # when the rows on both sides are gone.
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
        for table in written:
            cursor.execute(f"DELETE FROM {qn(table)}")
    return True


def _emptied(alias: str) -> bool:
    """``empty_written_tables``, False where it could not finish (a broken connection)."""
    try:
        return empty_written_tables(alias)
    except Exception:
        return False


def _fixture_teardown(self: TransactionTestCase) -> Any:
    """TransactionTestCase's reset, the cheap way where it can be (see the docstring);
    Django's own reset of every database where one of them cannot be."""
    if self.available_apps is not None or self.serialized_rollback:
        return _django_teardown(self)
    if not all(_emptied(alias) for alias in self._databases_names(include_mirrors=False)):
        return _django_teardown(self)
    return None


def install() -> None:
    """Use the cheaper reset for every transactional test of this process."""
    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[method-assign]
