"""What the hand-written statements of the hot paths share: the jobs database, table and
column names, and the few value conversions that differ between PostgreSQL, SQLite and
MySQL/MariaDB.

The hot paths (enqueue, claim, settle, recovery) bypass the ORM: building and
compiling a query costs more Python than the database spends running it. Values are
always bound as parameters; only names from the models are formatted into SQL.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from django_jobqueue import conf, validation
from django_jobqueue.models import Job, JournalEntry, QueuePause
from django_jobqueue.store.pooling import pooled_reason

JOB = Job._meta.db_table
JOURNAL = JournalEntry._meta.db_table
PAUSED = QueuePause._meta.db_table


def alias() -> str:
    return conf.get().database


def connection() -> BaseDatabaseWrapper:
    return connections[alias()]


def jobs() -> QuerySet[Job]:
    return Job.objects.using(alias())


def journal_entries() -> QuerySet[JournalEntry]:
    return JournalEntry.objects.using(alias())


def lockable(qs: QuerySet[Job], *, skip_locked: bool) -> QuerySet[Job]:
    """Row locks where the database has them (SQLite serialises writers instead)."""
    features = connections[alias()].features
    if not features.has_select_for_update:
        return qs
    if skip_locked and features.has_select_for_update_skip_locked:
        return qs.select_for_update(skip_locked=True)
    return qs.select_for_update()


dumps = validation.dumps


def loads(value: Any) -> Any:
    """A JSON column as read by a raw cursor (text on both backends; None stays None);
    a value that cannot be decoded is a ``validation.Undecodable``, never an error."""
    if value is None or not isinstance(value, str | bytes):
        return value
    if value == "{}":  # the usual empty carry or payload, without the parser
        return {}
    return validation.decode(value)


_depth_caps: dict[str, tuple[int, str] | None] = {}


def json_depth_cap(alias: str) -> tuple[int, str] | None:
    """How many levels the JSON columns of database ``alias`` nest a document, and whose
    limit that is; None where it is deeper than any reader decodes. MariaDB's
    ``JSON_VALID`` check (Django's JSONField column) refuses 32 levels or more, MySQL
    8's JSON type more than 100. Known once per alias: the enqueue hot path asks."""
    try:
        return _depth_caps[alias]
    except KeyError:
        pass
    conn = connections[alias]
    cap: tuple[int, str] | None = None
    if conn.vendor == "mysql":
        if getattr(conn, "mysql_is_mariadb", False):
            cap = (31, "MariaDB's JSON columns")
        else:
            cap = (100, "MySQL's JSON columns")
    _depth_caps[alias] = cap
    return cap


class Dialect:
    """The differences the raw statements care about, for one connection."""

    def __init__(self, conn: BaseDatabaseWrapper) -> None:
        self.conn = conn
        self.postgres = conn.vendor == "postgresql"
        # MySQL 8 and MariaDB 10.6+: row locks with SKIP LOCKED, but no UPDATE … RETURNING
        # and no data-modifying CTEs, so claims and settlements take a few statements in
        # one transaction there (see claim.py and settle.py).
        self.mysql = conn.vendor == "mysql"
        # JSON text is cast on PostgreSQL; SQLite and MySQL/MariaDB take the text as it is.
        self.json = "%s::jsonb" if self.postgres else "%s"
        self.skip_locked = " FOR UPDATE SKIP LOCKED" if self.postgres or self.mysql else ""
        self.materialized = "MATERIALIZED "
        # A claim condition: the row's queue is not paused. On PostgreSQL the paused
        # names are read once per statement (an InitPlan) and each candidate is only
        # compared with them, so the claim keeps its index scan. Written as array
        # containment, whose selectivity the planner takes as small whatever the queue
        # column's statistics (a plain "queue <> ALL(...)" on a table of one queue was
        # estimated to remove every row, and the claim index was dropped for a sort).
        if self.postgres:
            self.not_paused = f"NOT (ARRAY[j.queue] <@ ARRAY(SELECT queue FROM {PAUSED}))"
        else:
            self.not_paused = f"j.queue NOT IN (SELECT queue FROM {PAUSED})"
        options = conn.settings_dict.get("OPTIONS") or {}
        # Behind a transaction pooler (PgBouncer) each transaction may run on another
        # server session: no session state may be relied on (see use_generic_plans).
        self.pooled = self.postgres and pooled_reason(conn.settings_dict) is not None
        # Prepared statements, unless the project binds server-side (and so chose its
        # own threshold) or turned them off explicitly, or the database looks pooled
        # and the project did not turn them on explicitly (a PgBouncer older than 1.21,
        # or without max_prepared_statements, loses them between transactions).
        if "prepare_threshold" in options:
            prepare = options["prepare_threshold"] is not None
        else:
            prepare = not self.pooled
        self.prepare = self.postgres and prepare and options.get("server_side_binding") is not True

    def run(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (none for a statement that returns none).

        On PostgreSQL through psycopg's own cursor: values bound server-side (nothing
        rendered into the text) and the statement prepared, so the few hot statements
        are parsed and planned once per connection. Errors are Django's, as through a
        Django cursor.
        """
        if self.postgres:
            import psycopg  # only ever reached on PostgreSQL, where Django needs it too

            self.conn.ensure_connection()
            raw = self.conn.connection
            prepare = self.prepare
            if prepare and raw.prepare_threshold is None:
                # Django turns psycopg's preparing off (None); a threshold no statement
                # reaches turns it back on for the statements that ask, and only those.
                raw.prepare_threshold = sys.maxsize
            # Django's connection hands out client-side binding cursors: ask for a plain one.
            with self.conn.wrap_database_errors, psycopg.Cursor(raw) as cursor:
                cursor.execute(statement, params, prepare=True if prepare else None)
                return cursor.fetchall() if cursor.description else []
        with self.conn.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def job_id(self, value: uuid.UUID) -> Any:
        if self.postgres:
            return value
        if self.mysql and self.conn.features.has_native_uuid_field:
            return str(value)  # MariaDB 10.7+: Django's column is the native UUID type
        return value.hex  # char(32) on SQLite and MySQL

    def dt(self, value: datetime | None) -> Any:
        if value is None or self.postgres:
            return value
        return self.conn.ops.adapt_datetimefield_value(value)

    def read_uuid(self, value: Any) -> uuid.UUID:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))

    def read_dt(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, datetime):
            if self.mysql and value.tzinfo is None and self.conn.timezone is not None:
                # MySQL's DATETIME is naive, stored in the connection's time zone.
                return timezone.make_aware(value, self.conn.timezone)
            return value
        parsed = parse_datetime(str(value))
        if parsed is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``: one array parameter on PostgreSQL, a list of
        parameters elsewhere."""
        if self.postgres:
            return f"{column} = ANY(%s)", [list(values)]
        marks = ", ".join(["%s"] * len(values))
        return f"{column} IN ({marks})", list(values)


def dialect() -> Dialect:
    return Dialect(connection())


T = TypeVar("T")

# MySQL/MariaDB: error 1213, "Deadlock found when trying to get lock". InnoDB rolls the
# whole transaction back, and the manual's advice is to run it again.
_MYSQL_DEADLOCK = 1213


def retrying_deadlocks(run: Callable[[], T], *, attempts: int = 5) -> T:
    """``run()`` (one transaction of its own), run again when MySQL/MariaDB chose it as
    a deadlock's victim: two cleanups' batches can lock each other's index gaps in
    opposite orders there. Elsewhere, and inside a caller's
    transaction (rolled back whole: only the caller can retry), errors pass through."""
    conn = connection()
    retry = conn.vendor == "mysql" and not conn.in_atomic_block
    for attempt in range(1, attempts + 1):
        try:
            return run()
        except OperationalError as exc:
            code = exc.__cause__.args[0] if exc.__cause__ and exc.__cause__.args else None
            if not retry or code != _MYSQL_DEADLOCK or attempt == attempts:
                raise
            logging.getLogger("django_jobqueue").info("deadlock victim; running it again")
            time.sleep(0.01 * attempt)
    raise AssertionError("unreachable")


_generic_plans: weakref.WeakSet[Any] = weakref.WeakSet()


def use_generic_plans(d: Dialect) -> None:
    """Have this connection plan its prepared statements once (a worker loop's own).

    PostgreSQL re-plans a prepared statement on every run while it guesses that a
    plan for the actual values would be much cheaper; on a table of a million
    pending rows it guessed so for the claim and spent more time planning than
    running. The hot statements' plans (index order for the claim, primary keys for
    settling) do not depend on the values, so the plan made once is the one wanted.
    Set per connection, and again after a reconnect; never on a pooled connection,
    whose session setting would stay behind on whichever server session ran it.
    """
    if not d.prepare or d.pooled:
        return
    d.conn.ensure_connection()
    raw = d.conn.connection
    if raw in _generic_plans:
        return
    d.run("SET plan_cache_mode = force_generic_plan", [])
    _generic_plans.add(raw)


def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


def flatten(rows: Iterable[Sequence[Any]]) -> list[Any]:
    return [value for row in rows for value in row]
