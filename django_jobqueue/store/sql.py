"""What the store's hand-written statements share: the jobs database (its alias, its
connection, its querysets), the table names, the decoding of JSON columns, and the
database's dialect (``dialect()``), which holds everything that differs between
PostgreSQL, SQLite and MySQL/MariaDB. ``Fragment`` is SQL text with its parameters.

The hot paths (enqueue, claim, settle, recovery) bypass the ORM: building and
compiling a query costs more Python than the database spends running it. Values are
always bound as parameters; only names from the models are formatted into SQL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet

from django_jobqueue import conf, validation
from django_jobqueue.models import Job, JournalEntry, QueuePause
from django_jobqueue.store.dialects import Dialect as Dialect
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.fragment import Fragment as Fragment

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


# Transitional: ``json_depth_cap`` and ``retrying_deadlocks`` (and ``lockable``) are
# becoming methods of the dialects' storage half, where their callers will ask; they
# go from here then, and with them the last vendor comparisons of this module.
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


def dialect() -> Dialect:
    """The jobs database's dialect (resolved once per alias)."""
    return for_alias(alias())


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


def placeholders(count: int) -> str:
    return ", ".join(["%s"] * count)


def flatten(rows: Iterable[Sequence[Any]]) -> list[Any]:
    return [value for row in rows for value in row]
