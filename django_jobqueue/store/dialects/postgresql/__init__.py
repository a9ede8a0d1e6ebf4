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


def _utc_times(conn: Any, raw: Any, cursor: Any, result: Any) -> None:
    """Have ``cursor`` read the timestamptz columns of its ``result`` with psycopg's own
    loader where that reads what Django's does: aware datetimes in UTC, the zone of
    Django's connection and of the session. Django's loader is Python (psycopg's
    parser, then the zone put in), about 8 us a value, two per claimed job; psycopg's C
    one is several times faster.

    Set once the rows are there (psycopg reloads the result's loaders when one is
    registered), and only for a result with such a column: registering copies the
    cursor's loaders and makes it a new transformer, 5 % of an enqueue's instructions
    when it was done before every statement, an ``INSERT`` that returns nothing
    included."""
    oid, loader = _timestamptz()
    if not any(result.ftype(i) == oid for i in range(result.nfields)):
        return
    if conn.timezone is not UTC or raw.pgconn.parameter_status(b"TimeZone") != b"UTC":
        return
    cursor.adapters.register_loader(oid, loader)


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
        with conn.wrap_database_errors, kind(raw) as cursor:
            cursor.execute(native or statement, params, prepare=True if prepare else None)
            # Rows if it returned columns: what ``cursor.description`` tells, read from the
            # result itself (the description is a list of objects made anew, one a column,
            # 13 for a turn's claimed rows).
            result = cursor.pgresult
            if result is None or not result.nfields:
                return []
            _utc_times(conn, raw, cursor, result)
            return cursor.fetchall()

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
