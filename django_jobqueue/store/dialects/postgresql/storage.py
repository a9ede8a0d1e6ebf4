"""PostgreSQL's storage half of its dialect (see ``dialects.base``): one-statement bulk
inserts, the database's clock for rate tokens, ``percentile_cont``, the planner's row
estimates, LISTEN/NOTIFY wake-ups and SQLSTATE-classified errors."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any, ClassVar

from django.core.exceptions import EmptyResultSet
from django.db.models import Model, QuerySet

from django_jobqueue import validation
from django_jobqueue.models import Job, JournalEntry, StepEdge
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.storage import (
    EDGE,
    JOB,
    RECORD,
    ROW_COLUMNS,
    STEP_COLUMN_LIST,
    STEP_COLUMNS,
    STEP_FRESH,
    STREAM,
    NewRow,
    NewStep,
    NewStreamItem,
    StorageStatements,
)
from django_jobqueue.store.dialects.base.wakeups import Hearing, Wakeups, id_notes
from django_jobqueue.store.dialects.postgresql.copying import copy_jobs
from django_jobqueue.store.pooling import pooled_reason

# A workflow's steps and edges: one statement whatever the count, and one parameter:
# the rows as a JSON array of arrays written straight from each payload's JSON text
# (nothing encoded twice), each array's elements in its document's order
# (``STEP_ORDER``, ``EDGE_ORDER``: column names). The statements are built from those
# orders and the insert's column lists, each element read as its model field's type, a
# column the order lacks as NULL: no position is written by hand (arrays, not objects
# by name, because a bulk of 50,000 rows as objects took 15-18 % longer to insert, as
# columns 9 %). An element past the end of a row's array is NULL: the optional ones come
# last, left out when a row has none, and one whose absence means a default (the trace
# context's "") is read through ``coalesce``. (Plain jobs go in by COPY: ``copying``.)
# A step has no dedup or idempotency key.
_FIRST = tuple(
    name
    for name in ROW_COLUMNS
    if name not in ("dedup_key", "idempotency_key", "trace_context", "job_key")
)
STEP_ORDER: tuple[str, ...] = (*_FIRST, *STEP_COLUMNS, "trace_context", "job_key")
EDGE_ORDER: tuple[str, ...] = ("workflow_id", "parent_id", "child_id")
_EMPTY = {f.name: f.default for f in fields(NewRow) if isinstance(f.default, str)}


def _select(conn: Any, model: type[Model], order: Sequence[str], columns: Sequence[str]) -> str:
    """The values of ``columns`` read from a document row ``r`` in ``order``."""
    by_column = {f.column: f for f in model._meta.concrete_fields}
    values = []
    for name in columns:
        if name not in order:
            values.append("NULL")
            continue
        # A varchar's length is the INSERT's to check (a cast to varchar(n) would cut).
        kind = str(by_column[name].db_type(conn)).partition("(")[0]
        read = (
            f"r->{order.index(name)}" if kind == "jsonb" else f"(r->>{order.index(name)})::{kind}"
        )
        values.append(f"coalesce({read}, '{_EMPTY[name]}')" if name in _EMPTY else read)
    return ", ".join(values)


def _fresh(defaults: Sequence[tuple[str, str]]) -> str:
    # A SELECT's untyped literal is text, which no assignment casts to jsonb: the carry's is.
    return ", ".join("'{}'::jsonb" if name == "carry" else value for name, value in defaults)


_ROWS = " FROM jsonb_array_elements(%s::jsonb) AS r"
_STATEMENTS: list[tuple[str, str]] = []


def _statements(conn: Any) -> tuple[str, str]:
    """The steps' insert and the edges' insert, built on first use (a column's type is
    the same on every PostgreSQL connection)."""
    if _STATEMENTS:
        return _STATEMENTS[0]
    steps = (*ROW_COLUMNS, *STEP_COLUMNS)
    step = (
        f"INSERT INTO {JOB} ({STEP_COLUMN_LIST}) SELECT {_select(conn, Job, STEP_ORDER, steps)},"
        f" {_fresh(STEP_FRESH)}{_ROWS}"
    )
    edge = (
        f"INSERT INTO {EDGE} ({', '.join(EDGE_ORDER)})"
        f" SELECT {_select(conn, StepEdge, EDGE_ORDER, EDGE_ORDER)}{_ROWS}"
    )
    _STATEMENTS.append((step, edge))
    return step, edge


# SQLSTATEs a new connection may get past: serialization_failure, deadlock_detected.
_TRANSIENT_STATES = {"40001", "40P01"}


class PostgreSQLStorage(StorageStatements):
    """PostgreSQL: inserts, tokens, journal deletion, percentiles, wake-ups, errors..."""

    minimum_version: ClassVar[tuple[int, ...]] = (12,)
    claim_needs: ClassVar[str] = "UPDATE ... RETURNING over MATERIALIZED, SKIP LOCKED subqueries"
    json_mark: ClassVar[str] = "%s::jsonb"
    # The settlement's statement writes the runs' lines (``claiming.settle_ctes``).
    settles_run_logs: ClassVar[bool] = True
    _greatest: ClassVar[str] = "GREATEST"
    _least: ClassVar[str] = "LEAST"

    @classmethod
    def pooled_reason(cls, database: Mapping[str, Any]) -> str | None:
        return pooled_reason(database)

    @classmethod
    def listens(cls) -> bool:
        return True

    def insert_jobs(self, rows: Iterable[NewRow]) -> None:
        """One row (an enqueue's) as VALUES; more in one ``COPY`` whatever the count
        (``copying``), on Django's connection's psycopg connection, in its transaction:
        rows that come from a generator are sent as they are made, while the server
        inserts those before them."""
        if isinstance(rows, Sequence) and len(rows) <= 1:
            super().insert_jobs(rows)
        else:
            conn = self.conn
            conn.ensure_connection()
            with conn.wrap_database_errors, conn.connection.cursor() as cursor:
                copy_jobs(cursor, rows)

    def append_record(
        self, *, guard: Fragment, clear: str | None, job_id: uuid.UUID, record: str
    ) -> bool:
        """In one statement: the row held in a CTE, the record inserted for the row it
        returns (none if the guard failed). With nothing to clear the row is locked, not
        updated (FOR NO KEY UPDATE: what an UPDATE of it takes, so a concurrent takeover
        is waited for and the guard checked again on its result): a new version of the
        row per step would grow, in a task's one transaction, a chain of versions that
        every later step walks."""
        if clear is None:
            held = f"SELECT id FROM {JOB} WHERE {guard.sql} FOR NO KEY UPDATE"
        else:
            held = f"UPDATE {JOB} SET {clear} WHERE {guard.sql} RETURNING id"
        statement = (
            f"WITH held AS ({held}) INSERT INTO {RECORD} (job_id, record, size)"
            " SELECT id, %s::jsonb, %s FROM held RETURNING 1"
        )
        return bool(self.run(statement, [*guard.params, record, len(record)]))

    def append_stream(self, *, guard: Fragment, item: NewStreamItem, channel: str) -> bool:
        """In one statement: the row held in a CTE (locked, not updated, as in
        ``append_record``), the item inserted at the next offset for the row it returns,
        and the notification sent for the item inserted (none if the guard failed)."""
        offset, job = self.stream_column("offset"), self.stream_column("job")
        statement = (
            f"WITH held AS (SELECT id FROM {JOB} WHERE {guard.sql} FOR NO KEY UPDATE),"
            f" added AS ({self.stream_insert()} SELECT held.id, (SELECT COALESCE(MAX({offset}),"
            f" 0) + 1 FROM {STREAM} WHERE {job} = held.id), %s::jsonb, %s, %s, '', %s, %s"
            f" FROM held RETURNING {job})"
            " SELECT pg_notify(%s, %s) FROM added"
        )
        values = [item.value, len(item.value), item.run, item.write_no, item.written_at]
        params = [*guard.params, *values, channel, str(item.job_id)]
        return bool(self.run(statement, params))

    def hold_job(self, *, guard: Fragment) -> bool:
        """Locked, not updated (FOR NO KEY UPDATE), for the reason ``append_record``
        gives: no new version of the row per write."""
        return bool(
            self.run(f"SELECT 1 FROM {JOB} WHERE {guard.sql} FOR NO KEY UPDATE", guard.params)
        )

    def insert_steps(self, steps: Sequence[NewStep]) -> None:
        """In one statement whatever the count (a step has no dedup or idempotency key)."""
        if steps:
            self.run(_statements(self.conn)[0], [_steps_document(steps)])

    def insert_edges(self, edges: Sequence[tuple[Any, Any, Any]]) -> None:
        if edges:
            self.run(_statements(self.conn)[1], [_edges_document(edges)])

    def insert_graph(
        self, steps: Sequence[NewStep], edges: Sequence[tuple[Any, Any, Any]], *, batch: int
    ) -> None:
        """One statement per chunk, as ``enqueue_many``: a chunk of steps and a chunk of
        edges together (an edge has no key to check, and the steps' keys to their
        workflow are checked at commit, so an edge may come before its step's chunk)."""
        for start in range(0, max(len(steps), len(edges)), batch):
            some, links = steps[start : start + batch], edges[start : start + batch]
            if some and links:
                step, edge = _statements(self.conn)
                graph = f"WITH steps AS ({step}) {edge}"
                self.run(graph, [_steps_document(some), _edges_document(links)])
            else:
                self.insert_steps(some)
                self.insert_edges(links)

    def _clock(self) -> tuple[str, list[Any]]:
        """The database's clock: the same for every host."""
        return "extract(epoch FROM statement_timestamp())::float8", []

    def percentiles(
        self, qs: QuerySet[JournalEntry]
    ) -> dict[str, tuple[float | None, float | None]]:
        try:
            inner, params = qs.values("kind", "duration").query.sql_with_params()
        except EmptyResultSet:  # a queryset that cannot match (``none()``)
            return {}
        seconds = "EXTRACT(EPOCH FROM d.duration)"
        query = (
            f"SELECT d.kind, percentile_cont(0.5) WITHIN GROUP (ORDER BY {seconds}),"
            f" percentile_cont(0.95) WITHIN GROUP (ORDER BY {seconds}) FROM ({inner}) AS d"
            " GROUP BY d.kind"
        )
        with self.conn.cursor() as cursor:
            cursor.execute(query, params)
            rows = cursor.fetchall()
        return {
            kind: (None if p50 is None else float(p50), None if p95 is None else float(p95))
            for kind, p50, p95 in rows
        }

    def planned_rows(self, qs: QuerySet[Any]) -> int | None:
        statement, params = qs.order_by().values("pk").query.sql_with_params()
        with self.conn.cursor() as cursor:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {statement}", params)
            row = cursor.fetchone()
        plan = row[0] if row else None
        if isinstance(plan, str):
            plan = json.loads(plan)
        return int(plan[0]["Plan"]["Plan Rows"]) if plan else None

    def notify(self, channel: str, payload: str) -> None:
        with self.conn.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload])

    def announce(self, channel: str, ids: Iterable[object]) -> None:
        """All of the notifications in one statement."""
        notes = id_notes(ids)
        if notes:
            with self.conn.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p", [channel, notes]
                )

    def listen(self, channel: str, *more: str) -> Wakeups:
        return _Listening(self.conn.get_connection_params(), (channel, *more))

    def listens_here(self) -> bool:
        return not self.pooled and not (self.conn.settings_dict.get("OPTIONS") or {}).get("pool")

    def listen_here(self, channel: str, on_note: Callable[[str, str], None]) -> Hearing:
        self.conn.ensure_connection()
        return _Hearing(self.conn, channel, on_note)

    def is_connection_error(self, exc: BaseException) -> bool:
        if getattr(exc.__cause__, "sqlstate", None) in _TRANSIENT_STATES:
            return True
        return super().is_connection_error(exc)


class _Listening:
    """A connection of its own, never one lent by Django's connection pool
    (OPTIONS["pool"]): it is held for the worker's life and keeps listening."""

    def __init__(self, params: dict[str, Any], channels: tuple[str, ...]) -> None:
        import psycopg  # only ever reached on PostgreSQL, where Django needs it too

        self._raw = psycopg.connect(**params)
        self._raw.autocommit = True
        for channel in channels:
            self._raw.execute(_listen(channel))

    def payloads(self, timeout: float) -> Iterator[str]:
        for _, payload in self.notes(timeout):
            yield payload

    def notes(self, timeout: float) -> Iterator[tuple[str, str]]:
        for note in self._raw.notifies(timeout=timeout):
            yield note.channel, note.payload

    def close(self) -> None:
        self._raw.close()


def _listen(channel: str) -> Any:
    """``LISTEN`` on ``channel``: a channel is a name, which no parameter can bind, so
    psycopg quotes it."""
    from psycopg import sql  # only ever reached on PostgreSQL, where Django needs it too

    return sql.SQL("LISTEN {}").format(sql.Identifier(channel))


class _Hearing:
    """Django's connection of this thread, listening too: notifications that arrive with
    a statement's results reach the handler as psycopg parses them (none is kept for
    later), and those that arrive alone when ``read`` takes them in."""

    def __init__(self, wrapper: Any, channel: str, on_note: Callable[[str, str], None]) -> None:
        self._wrapper = wrapper
        self._raw = raw = wrapper.connection
        self._on_note = on_note
        raw.add_notify_handler(lambda note: on_note(note.channel, note.payload))
        # Autocommit, as Django keeps it outside atomic blocks: listening from now.
        with wrapper.cursor() as cursor:
            cursor.execute(_listen(channel).as_string(raw))

    def fileno(self) -> int:
        return int(self._raw.fileno())

    def current(self) -> bool:
        return self._wrapper.connection is self._raw and not self._raw.closed

    def read(self) -> int:
        pgconn = self._raw.pgconn
        pgconn.consume_input()
        encoding = self._raw.info.encoding
        heard = 0
        while (note := pgconn.notifies()) is not None:
            heard += 1
            self._on_note(note.relname.decode(encoding), note.extra.decode(encoding))
        return heard


def _step_tail(row: NewRow, q: Callable[[str], str]) -> str:
    """A step's trace context and key as the document's last elements (the key, when
    there is one, after the context, "" for none), or nothing: ``r->>12`` and
    ``r->>13`` past the end are NULL."""
    if row.job_key is not None:
        return f",{q(row.trace_context)},{q(row.job_key)}"
    return f",{q(row.trace_context)}" if row.trace_context else ""


def _edges_document(edges: Sequence[tuple[Any, Any, Any]]) -> str:
    """``[[workflow_id, parent_id, child_id], …]`` as JSON text."""
    return "[" + ",".join(f'["{w}","{p}","{c}"]' for w, p, c in edges) + "]"


def _steps_document(steps: Sequence[NewStep]) -> str:
    """``[[id, kind, queue, payload, priority, created_at, visible_at, workflow_id,
    step_name, join_when, parents_open, status, trace_context, key], …]`` as JSON text
    (the trace context and the key only when there are some)."""
    quoted: dict[str, str] = {}

    def q(text: str) -> str:  # kinds, queues, joins and statuses repeat: encoded once each
        found = quoted.get(text)
        if found is None:
            found = quoted[text] = validation.dumps(text)
        return found

    parts = [
        f'["{s.row.id}",{q(s.row.kind)},{q(s.row.queue)},{s.row.payload},{s.row.priority},'
        f'"{s.row.created_at.isoformat()}","{s.row.visible_at.isoformat()}",'
        f'"{s.workflow_id}",{validation.dumps(s.step_name)},{q(s.join_when)},{s.parents_open},'
        f"{q(s.status)}{_step_tail(s.row, q)}]"
        for s in steps
    ]
    return "[" + ",".join(parts) + "]"
