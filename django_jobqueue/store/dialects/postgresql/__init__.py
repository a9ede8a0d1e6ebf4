"""PostgreSQL: one-statement claims and settlements, server-side binding and prepared
statements through psycopg, LISTEN/NOTIFY wake-ups."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from typing import Any, ClassVar

from django_jobqueue.store.dialects.base import Dialect
from django_jobqueue.store.dialects.postgresql.claiming import PostgreSQLClaiming, text_array
from django_jobqueue.store.dialects.postgresql.health import PostgreSQLHealth
from django_jobqueue.store.dialects.postgresql.partitions import PostgreSQLPartitions
from django_jobqueue.store.dialects.postgresql.storage import PostgreSQLStorage
from django_jobqueue.store.pooling import pooled_reason


@lru_cache(maxsize=1)
def _timestamptz() -> tuple[int, Any]:
    """timestamptz's oid and psycopg's own (C) text loader for it, looked up once."""
    import psycopg
    from psycopg.pq import Format

    oid = psycopg.adapters.types["timestamptz"].oid
    return oid, psycopg.adapters.get_loader(oid, Format.TEXT)


def _utc_times(conn: Any, raw: Any) -> bool:
    """Whether the cursors of ``raw`` may read timestamptz columns with psycopg's own
    loader: it reads what Django's does (aware datetimes in UTC) only where Django's
    connection and the session are both in UTC. Django's loader is Python (psycopg's
    parser, then the zone put in), about 8 us a value, two per claimed job; psycopg's C
    one is several times faster."""
    return conn.timezone is UTC and raw.pgconn.parameter_status(b"TimeZone") == b"UTC"


class _Held:
    """The cursors one psycopg connection's statements go through (``PostgreSQL.run``),
    one of each kind, kept while that connection lives.

    A cursor made for each statement cost 20-30 us hot and 40-110 at an idle worker's
    wake-up more than one kept (its transformer, the connection's adapters copied), and
    registering the C timestamptz loader on it copies the adapters again: a kept cursor
    pays both once. Held on Django's connection wrapper, which is one thread's, and
    dropped when Django opens another psycopg connection for it."""

    __slots__ = ("cursors", "raw", "utc")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.cursors: dict[type, Any] = {}
        self.utc: set[type] = set()  # the kinds whose cursor has the C loader

    @staticmethod
    def of(conn: Any, raw: Any) -> _Held:
        held: _Held | None = conn.__dict__.get(_HELD)
        if held is None or held.raw is not raw:
            held = conn.__dict__[_HELD] = _Held(raw)
        return held

    def cursor(self, conn: Any, kind: type) -> Any:
        """The cursor of ``kind``; a new one where the kept one reads times with the C
        loader and the session's zone has changed since (it would misread them)."""
        cursor = self.cursors.get(kind)
        if cursor is not None and kind in self.utc and not _utc_times(conn, self.raw):
            cursor = None
        if cursor is None or cursor.closed:
            cursor = self.cursors[kind] = kind(self.raw)
            self.utc.discard(kind)
        return cursor

    def read_times(self, conn: Any, kind: type, cursor: Any, result: Any) -> None:
        """Have ``cursor`` read timestamptz with psycopg's loader (``_utc_times``), once
        a result with such a column comes: psycopg reloads the result's loaders when one
        is registered, and registering before every statement cost 5 % of an enqueue's
        instructions, an ``INSERT`` that returns nothing included."""
        if kind in self.utc:
            return
        oid, loader = _timestamptz()
        if any(result.ftype(i) == oid for i in range(result.nfields)) and _utc_times(
            conn, self.raw
        ):
            cursor.adapters.register_loader(oid, loader)
            self.utc.add(kind)


#: Where ``_Held`` sits on Django's connection wrapper.
_HELD = "_django_jobqueue_cursors"


_MARK = re.compile(r"%(.)", re.DOTALL)


@lru_cache(maxsize=64)  # a few shapes a process; a claim's is some 15 KiB
def numbered(statement: str, count: int) -> str | None:
    """``statement`` with its ``count`` ``%s`` placeholders as PostgreSQL's own ``$1``,
    ``$2``… (and ``%%`` as ``%``), for psycopg's ``RawCursor``, made once per statement
    text; None where that would change its meaning (a ``$`` already in it, another
    ``%`` mark, another count), for psycopg's own conversion to judge.

    psycopg converts ``%s`` statements on every execution, and keeps what it made only
    for statements under 4 KiB and 50 parameters: a worker's claim for a project of
    many kinds, keyed ones among them, is over 15 KiB and 200 parameters, and was
    split by regular expression anew every turn (about a third of the claim's time in
    the worker, more than the statement took in the server)."""
    if "$" in statement:
        return None
    seen = 0

    def mark(m: re.Match[str]) -> str:
        nonlocal seen
        if m.group(1) == "%":
            return "%"
        if m.group(1) != "s":
            raise ValueError(m.group(0))
        seen += 1
        return f"${seen}"

    try:
        found = _MARK.sub(mark, statement)
    except ValueError:
        return None
    return found if seen == count else None


class PostgreSQL(
    PostgreSQLClaiming, PostgreSQLStorage, PostgreSQLHealth, PostgreSQLPartitions, Dialect
):
    vendor: ClassVar[str] = "postgresql"

    @cached_property
    def pooled(self) -> bool:
        """Behind a transaction pooler (PgBouncer) each transaction may run on another
        server session: no session state may be relied on (see use_generic_plans)."""
        return pooled_reason(self.conn.settings_dict) is not None

    @cached_property
    def prepare(self) -> bool:
        """Prepared statements, unless the project binds server-side (and so chose its
        own threshold) or turned them off explicitly, or the database looks pooled and
        the project did not turn them on explicitly (a PgBouncer older than 1.21, or
        without max_prepared_statements, loses them between transactions)."""
        options = self.conn.settings_dict.get("OPTIONS") or {}
        if "prepare_threshold" in options:
            prepare = options["prepare_threshold"] is not None
        else:
            prepare = not self.pooled
        return prepare and options.get("server_side_binding") is not True

    def run(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Through psycopg's own cursor: values bound server-side (nothing rendered into
        the text) and the statement prepared, so the few hot statements are parsed and
        planned once per connection. Errors are Django's, as through a Django cursor."""
        import psycopg  # only ever reached on PostgreSQL, where Django needs it too

        conn = self.conn
        conn.ensure_connection()
        raw = conn.connection
        prepare = self.prepare
        if prepare and raw.prepare_threshold is None:
            # Django turns psycopg's preparing off (None); a threshold no statement
            # reaches turns it back on for the statements that ask, and only those.
            raw.prepare_threshold = sys.maxsize
        # Django's connection hands out client-side binding cursors: ask for a plain one,
        # or a raw one for a statement already in PostgreSQL's own marks (``numbered``).
        native = numbered(statement, len(params)) if isinstance(params, Sequence) else None
        kind = psycopg.Cursor if native is None else psycopg.RawCursor
        held = _Held.of(conn, raw)
        cursor = held.cursor(conn, kind)
        with conn.wrap_database_errors:
            cursor.execute(native or statement, params, prepare=True if prepare else None)
            # Rows if it returned columns: what ``cursor.description`` tells, read from the
            # result itself (the description is a list of objects made anew, one a column,
            # 13 for a turn's claimed rows).
            result = cursor.pgresult
            if result is None or not result.nfields:
                return []
            held.read_times(conn, kind, cursor, result)
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows

    def job_id(self, value: uuid.UUID) -> Any:
        return value

    def dt(self, value: datetime | None) -> Any:
        return value

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """One array parameter; a list of names (kinds, queues) as the array's text,
        made once per list (``text_array``)."""
        names = tuple(values)
        if names and all(type(v) is str for v in names):
            return f"{column} = ANY(%s::text[])", [text_array(names)]
        return f"{column} = ANY(%s)", [list(values)]
