"""PostgreSQL's storage half of its dialect (see ``dialects.base``): one-statement bulk
inserts, the database's clock for rate tokens, ``percentile_cont``, the planner's row
estimates, LISTEN/NOTIFY wake-ups and SQLSTATE-classified errors."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any, ClassVar

from django.core.exceptions import EmptyResultSet
from django.db.models import Model, QuerySet

from django_jobqueue import validation
from django_jobqueue.models import Job, JournalEntry, StepEdge
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.storage import (
    COLUMN_LIST,
    EDGE,
    FRESH_COLUMNS,
    JOB,
    RECORD,
    ROW_COLUMNS,
    STEP_COLUMN_LIST,
    STEP_COLUMNS,
    STEP_FRESH,
    NewRow,
    NewStep,
    StorageStatements,
    Wakeups,
)
from django_jobqueue.store.pooling import pooled_reason

# One statement whatever the count, and one parameter: the rows as a JSON array of
# objects, column name -> value, written straight from each payload's JSON text (nothing
# encoded twice), read by json_to_recordset with each column's type as the model gives
# it (``_recordset``). A column a document leaves out is NULL there: an optional one
# (``OPTIONAL``) is written only when it has a value, and one whose absence means a
# default (the trace context's "") is read through ``coalesce``.
OPTIONAL: tuple[str, ...] = ("dedup_key", "idempotency_key", "trace_context", "job_key")
_EMPTY = {f.name: f.default for f in fields(NewRow) if isinstance(f.default, str)}
_ABSENT = {name: f"'{value}'" for name, value in _EMPTY.items()}


def _select(columns: Sequence[str]) -> str:
    return ", ".join(
        f"coalesce(r.{name}, {_ABSENT[name]})" if name in _ABSENT else f"r.{name}"
        for name in columns
    )


def _recordset(conn: Any, model: type[Model], columns: Sequence[str]) -> str:
    """``json_to_recordset(%s::json) AS r(column type, …)``: each column's type is its
    ``model`` field's on this database (a varchar's length checked as an INSERT checks it)."""
    by_column = {f.column: f for f in model._meta.concrete_fields}
    typed = ", ".join(f"{name} {by_column[name].db_type(conn)}" for name in columns)
    return f"json_to_recordset(%s::json) AS r({typed})"


def _fresh(defaults: Sequence[tuple[str, str]]) -> str:
    # A SELECT's untyped literal is text, which no assignment casts to jsonb: the carry's is.
    return ", ".join("'{}'::jsonb" if name == "carry" else value for name, value in defaults)


_EDGE_COLUMNS = ("workflow_id", "parent_id", "child_id")


_STATEMENTS: list[tuple[str, str, str]] = []


def _statements(conn: Any) -> tuple[str, str, str]:
    """The bulk insert, the steps' insert and the edges' insert, built on first use (a
    column's type is the same on every PostgreSQL connection)."""
    if _STATEMENTS:
        return _STATEMENTS[0]
    steps = (*ROW_COLUMNS, *STEP_COLUMNS)
    bulk = (
        f"INSERT INTO {JOB} ({COLUMN_LIST}) SELECT {_select(ROW_COLUMNS)},"
        f" {_fresh(FRESH_COLUMNS)} FROM {_recordset(conn, Job, ROW_COLUMNS)}"
    )
    step = (
        f"INSERT INTO {JOB} ({STEP_COLUMN_LIST}) SELECT {_select(steps)},"
        f" {_fresh(STEP_FRESH)} FROM {_recordset(conn, Job, steps)}"
    )
    edge = (
        f"INSERT INTO {EDGE} ({', '.join(_EDGE_COLUMNS)}) SELECT {_select(_EDGE_COLUMNS)}"
        f" FROM {_recordset(conn, StepEdge, _EDGE_COLUMNS)}"
    )
    _STATEMENTS.append((bulk, step, edge))
    return bulk, step, edge


# SQLSTATEs a new connection may get past: serialization_failure, deadlock_detected.
_TRANSIENT_STATES = {"40001", "40P01"}


class PostgreSQLStorage(StorageStatements):
    """PostgreSQL: inserts, tokens, journal deletion, percentiles, wake-ups, errors..."""

    minimum_version: ClassVar[tuple[int, ...]] = (12,)
    claim_needs: ClassVar[str] = "UPDATE ... RETURNING over MATERIALIZED, SKIP LOCKED subqueries"
    json_mark: ClassVar[str] = "%s::jsonb"
    _greatest: ClassVar[str] = "GREATEST"
    _least: ClassVar[str] = "LEAST"

    @classmethod
    def pooled_reason(cls, database: Mapping[str, Any]) -> str | None:
        return pooled_reason(database)

    @classmethod
    def listens(cls) -> bool:
        return True

    def insert_jobs(self, rows: Sequence[NewRow]) -> None:
        """One row (an enqueue's) as VALUES; more in one statement whatever the count."""
        if len(rows) == 1:
            super().insert_jobs(rows)
        elif rows:
            self.run(_statements(self.conn)[0], [_bulk_document(rows)])

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

    def insert_steps(self, steps: Sequence[NewStep]) -> None:
        """In one statement whatever the count (a step has no dedup or idempotency key)."""
        if steps:
            self.run(_statements(self.conn)[1], [_steps_document(steps)])

    def insert_edges(self, edges: Sequence[tuple[Any, Any, Any]]) -> None:
        if edges:
            self.run(_statements(self.conn)[2], [_edges_document(edges)])

    def insert_graph(
        self, steps: Sequence[NewStep], edges: Sequence[tuple[Any, Any, Any]], *, batch: int
    ) -> None:
        """One statement per chunk, as ``enqueue_many``: a chunk of steps and a chunk of
        edges together (an edge has no key to check, and the steps' keys to their
        workflow are checked at commit, so an edge may come before its step's chunk)."""
        for start in range(0, max(len(steps), len(edges)), batch):
            some, links = steps[start : start + batch], edges[start : start + batch]
            if some and links:
                _, step, edge = _statements(self.conn)
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

    def listen(self, channel: str) -> Wakeups:
        return _Listening(self.conn.get_connection_params(), channel)

    def is_connection_error(self, exc: BaseException) -> bool:
        if getattr(exc.__cause__, "sqlstate", None) in _TRANSIENT_STATES:
            return True
        return super().is_connection_error(exc)


class _Listening:
    """A connection of its own, never one lent by Django's connection pool
    (OPTIONS["pool"]): it is held for the worker's life and keeps listening."""

    def __init__(self, params: dict[str, Any], channel: str) -> None:
        import psycopg  # only ever reached on PostgreSQL, where Django needs it too
        from psycopg import sql

        self._raw = psycopg.connect(**params)
        self._raw.autocommit = True
        # The channel is a name, which no parameter can bind: psycopg quotes it.
        self._raw.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    def payloads(self, timeout: float) -> Iterator[str]:
        for note in self._raw.notifies(timeout=timeout):
            yield note.payload

    def close(self) -> None:
        self._raw.close()


def _quoter() -> Callable[[str], str]:
    """A JSON string encoder that encodes each distinct text once (kinds, queues, joins
    and statuses repeat over a bulk's rows)."""
    quoted: dict[str, str] = {}

    def q(text: str) -> str:
        found = quoted.get(text)
        if found is None:
            found = quoted[text] = validation.dumps(text)
        return found

    return q


def _optional(r: NewRow, q: Callable[[str], str]) -> str:
    """The ``OPTIONAL`` columns that have a value, as ``,"name":value`` (nothing for the
    common row, which has none)."""
    if (
        r.job_key is None
        and r.dedup_key is None
        and r.idempotency_key is None
        and not r.trace_context
    ):
        return ""
    present = ((name, getattr(r, name)) for name in OPTIONAL)
    return "".join(
        f',"{name}":{q(v)}' for name, v in present if v is not None and v != _EMPTY.get(name)
    )


def _bulk_document(rows: Sequence[NewRow]) -> str:
    """``[{"id": …, "kind": …, "queue": …, "payload": …, "priority": …, "created_at": …,
    "visible_at": …, and the OPTIONAL columns that have a value}, …]`` as JSON text."""
    q = _quoter()
    stamps: dict[Any, str] = {}

    def stamp(moment: Any) -> str:
        found = stamps.get(moment)
        if found is None:
            found = stamps[moment] = moment.isoformat()
        return found

    parts = [
        f'{{"id":"{r.id}","kind":{q(r.kind)},"queue":{q(r.queue)},"payload":{r.payload},'
        f'"priority":{r.priority},"created_at":"{stamp(r.created_at)}",'
        f'"visible_at":"{stamp(r.visible_at)}"{_optional(r, q)}}}'
        for r in rows
    ]
    return "[" + ",".join(parts) + "]"


def _edges_document(edges: Sequence[tuple[Any, Any, Any]]) -> str:
    """``[{"workflow_id": …, "parent_id": …, "child_id": …}, …]`` as JSON text."""
    return (
        "["
        + ",".join(
            f'{{"workflow_id":"{w}","parent_id":"{p}","child_id":"{c}"}}' for w, p, c in edges
        )
        + "]"
    )


def _steps_document(steps: Sequence[NewStep]) -> str:
    """A bulk document's objects with the steps' own columns (``STEP_COLUMNS``) too."""
    q = _quoter()
    parts = [
        f'{{"id":"{s.row.id}","kind":{q(s.row.kind)},"queue":{q(s.row.queue)},'
        f'"payload":{s.row.payload},"priority":{s.row.priority},'
        f'"created_at":"{s.row.created_at.isoformat()}",'
        f'"visible_at":"{s.row.visible_at.isoformat()}","workflow_id":"{s.workflow_id}",'
        f'"step_name":{validation.dumps(s.step_name)},"join_when":{q(s.join_when)},'
        f'"parents_open":{s.parents_open},"status":{q(s.status)}{_optional(s.row, q)}}}'
        for s in steps
    ]
    return "[" + ",".join(parts) + "]"
