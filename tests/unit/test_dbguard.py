"""The worker's connection guard below the database: which errors are the connection's
(the guard backs off and the worker tries again) and which are the statement's (raised).

The errors are the drivers' own exception classes (psycopg, MySQLdb, sqlite3), wrapped
as Django wraps them (its ``DatabaseErrorWrapper``, on a backend's wrapper that never
connects), and classified by each database's dialect. No database is reached."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any

import MySQLdb
import psycopg
import pytest
from django.db import Error, IntegrityError, InterfaceError
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.utils import DatabaseErrorWrapper, load_backend

from django_jobqueue.store.dialects import Dialect, MySQL, PostgreSQL, SQLite
from django_jobqueue.worker import dbguard
from django_jobqueue.worker.dbguard import DbGuard

pytestmark = pytest.mark.sqlite

ENGINES = {
    PostgreSQL: "django.db.backends.postgresql",
    MySQL: "django.db.backends.mysql",
    SQLite: "django.db.backends.sqlite3",
}


def wrapper(cls: type[Dialect]) -> BaseDatabaseWrapper:
    settings_dict: dict[str, Any] = {"ENGINE": ENGINES[cls], "NAME": "x", "OPTIONS": {}}
    backend = load_backend(ENGINES[cls])
    made: BaseDatabaseWrapper = backend.DatabaseWrapper(settings_dict, "x")
    return made


def as_django_raises(cls: type[Dialect], error: BaseException) -> Error:
    """``error`` as Django raises it from a cursor of ``cls``'s database (a
    ``DatabaseError``, or an ``InterfaceError``, which Django keeps apart)."""
    with pytest.raises(Error) as raised, DatabaseErrorWrapper(wrapper(cls)):
        raise error
    assert raised.value.__cause__ is error
    return raised.value


CASES = [
    # PostgreSQL: a lost connection, a serialisation failure and a deadlock are
    # transient; a unique violation or a syntax error is the statement's.
    (PostgreSQL, psycopg.OperationalError("server closed the connection unexpectedly"), True),
    (PostgreSQL, psycopg.InterfaceError("the connection is closed"), True),
    (PostgreSQL, psycopg.errors.SerializationFailure("could not serialize access"), True),
    (PostgreSQL, psycopg.errors.DeadlockDetected("deadlock detected"), True),
    (PostgreSQL, psycopg.errors.UniqueViolation("duplicate key value"), False),
    (PostgreSQL, psycopg.errors.SyntaxError('syntax error at or near "SELEC"'), False),
    # MySQL/MariaDB: OperationalError is raised for much that is the statement's fault;
    # only the client's codes (2000-2999) and the listed server codes are transient.
    (MySQL, MySQLdb.OperationalError(2006, "MySQL server has gone away"), True),
    (MySQL, MySQLdb.OperationalError(2013, "Lost connection to server during query"), True),
    (MySQL, MySQLdb.OperationalError(1213, "Deadlock found when trying to get lock"), True),
    (MySQL, MySQLdb.OperationalError(1205, "Lock wait timeout exceeded"), True),
    (MySQL, MySQLdb.OperationalError(1927, "Connection was killed"), True),
    (MySQL, MySQLdb.OperationalError(1644, "a trigger's SIGNAL"), False),
    (MySQL, MySQLdb.OperationalError(1153, "Got a packet bigger than max_allowed_packet"), False),
    (MySQL, MySQLdb.IntegrityError(1062, "Duplicate entry 'k' for key"), False),
    (MySQL, MySQLdb.InterfaceError(0, ""), True),
    # SQLite: "database is locked" is another writer's turn; a constraint is the row's.
    (SQLite, sqlite3.OperationalError("database is locked"), True),
    (SQLite, sqlite3.OperationalError("unable to open database file"), True),
    (SQLite, sqlite3.IntegrityError("UNIQUE constraint failed: jobqueue_job.id"), False),
    (SQLite, sqlite3.ProgrammingError("Cannot operate on a closed cursor."), False),
]


@pytest.mark.parametrize(
    ("cls", "error", "transient"),
    CASES,
    ids=[f"{c.__name__}-{type(e).__name__}-{e.args[0]}" for c, e, _ in CASES],
)
def test_each_dialect_tells_the_connections_errors_from_the_statements(
    cls: type[Dialect], error: BaseException, transient: bool
) -> None:
    exc = as_django_raises(cls, error)
    assert cls("x").is_connection_error(exc) is transient


def test_a_mysql_code_is_read_only_from_the_mysql_driver() -> None:
    """A psycopg error whose first argument happens to be a MySQL code is not MySQL's."""
    exc = as_django_raises(PostgreSQL, psycopg.errors.UniqueViolation(1213))
    assert MySQL("x").is_connection_error(exc) is False


def test_a_statements_error_text_saying_locked_or_deadlock_counts_as_transient() -> None:
    """Drivers that say so only in words (a wrapped error of another class)."""
    exc = as_django_raises(SQLite, sqlite3.DatabaseError("database table is locked"))
    assert SQLite("x").is_connection_error(exc) is True
    assert SQLite("x").is_connection_error(ValueError("locked")) is False


def test_the_module_function_asks_the_dialect_of_the_alias_it_is_given() -> None:
    exc = as_django_raises(SQLite, sqlite3.OperationalError("database is locked"))
    assert dbguard.is_connection_error(exc, alias="default") is True
    refused = as_django_raises(SQLite, sqlite3.IntegrityError("NOT NULL constraint failed"))
    assert dbguard.is_connection_error(refused) is False


class TestDbGuard:
    """The guard itself: a connection error costs the call (None, a back-off that
    doubles up to 5 s, cut short by ``stopping``), anything else is raised."""

    def guard(self) -> DbGuard:
        stopping = threading.Event()
        stopping.set()  # no real waiting in a unit test
        return DbGuard("default", stopping)

    def test_a_connection_error_returns_none_and_backs_off(self) -> None:
        guard = self.guard()
        lost = as_django_raises(SQLite, sqlite3.OperationalError("disk I/O error"))

        def call() -> int:
            raise lost

        assert guard(call) is None
        assert guard.failures == 1
        assert guard.backoff() == pytest.approx(0.1)
        assert guard(call) is None
        assert guard.backoff() == pytest.approx(0.2)
        for _ in range(10):
            guard(call)
        assert guard.backoff() == 5.0
        assert guard(lambda: 7) == 7
        assert guard.failures == 0
        assert not guard.waiting

    def test_a_closed_connections_interface_error_backs_off_too(self) -> None:
        # Django's InterfaceError is an Error but not a DatabaseError.
        guard = self.guard()
        closed = as_django_raises(PostgreSQL, psycopg.InterfaceError("connection already closed"))
        assert isinstance(closed, InterfaceError)

        def call() -> None:
            raise closed

        assert guard(call) is None
        assert guard.failures == 1

    def test_any_other_database_error_is_raised(self) -> None:
        guard = self.guard()
        refused = as_django_raises(SQLite, sqlite3.IntegrityError("CHECK constraint failed"))

        def call() -> None:
            raise refused

        with pytest.raises(IntegrityError):
            guard(call)
        assert guard.failures == 0
