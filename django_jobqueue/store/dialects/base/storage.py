"""The storage half of the dialect interface (see ``dialects.base``): everything but the
hot path that differs between databases.

Each method here is the portable way (the one SQLite takes, and the default of the
others); a database's own ``storage`` module overrides what it does otherwise. The
store's modules say *what* to write or read and call these for *how*.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from django.core.checks import CheckMessage
from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.db.models import Q, QuerySet, UniqueConstraint
from django.db.models.sql.query import Query

from django_jobqueue.models import (
    Job,
    JournalEntry,
    MergeLock,
    RateBucket,
    StepEdge,
    StepRecord,
    StreamItem,
)
from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.wakeups import WakeupStatements

T = TypeVar("T")
M = TypeVar("M", bound=Any)

JOB = Job._meta.db_table
JOURNAL = JournalEntry._meta.db_table
BUCKET = RateBucket._meta.db_table
MERGE_LOCK = MergeLock._meta.db_table
EDGE = StepEdge._meta.db_table
RECORD = StepRecord._meta.db_table
STREAM = StreamItem._meta.db_table


@dataclass(frozen=True, slots=True)
class NewStreamItem:
    """One item a run writes to its job's stream outside any step (``append_stream``):
    its JSON text, the run, its position among the run's writes outside steps, when."""

    job_id: uuid.UUID
    value: str
    run: int
    write_no: int
    written_at: datetime


# A stream item's columns, in the order its INSERT lists them (the ORM's names for them).
STREAM_COLUMNS = ("job", "offset", "value", "size", "run", "step", "write_no", "written_at")


@dataclass(slots=True)
class NewRow:
    """One new pending job as an insert writes it (``payload``: its JSON text).

    Not frozen: made once per job of a bulk and only read after, and a frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` a field) took three times as
    long, a tenth of a bulk enqueue's time in Python."""

    id: uuid.UUID
    kind: str
    queue: str
    payload: str
    priority: int
    created_at: datetime
    visible_at: datetime
    dedup_key: str | None = None
    idempotency_key: str | None = None
    # The enqueuing code's trace context (``tracing.capture_context()``; "" for none).
    trace_context: str = ""
    job_key: str | None = None  # the job's key (per-key limits and fairness)


# A new row's columns: those a NewRow gives (its fields, in order: the row template and
# the parameters are built from this one list, so they cannot drift apart), then those
# every new row starts with (SQL literals: the model's defaults for a pending job nobody
# has run).
ROW_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(NewRow))
FRESH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("status", "'pending'"),
    ("claimed_by", "''"),
    ("run_count", "0"),
    ("failure_count", "0"),
    ("carry", "'{}'"),
    ("cancel_requested", "false"),
    ("cancel_actor", "''"),
)
COLUMN_LIST = ", ".join([*ROW_COLUMNS, *(name for name, _ in FRESH_COLUMNS)])


@dataclass(frozen=True, slots=True)
class NewStep:
    """One new workflow step: a new row and what makes it a step (its status is
    ``waiting`` while ``parents_open`` is above zero, else ``pending``)."""

    row: NewRow
    workflow_id: uuid.UUID
    step_name: str
    join_when: str
    parents_open: int
    status: str


# A step's columns after the row's: the step's own, then the fresh ones but its status.
STEP_COLUMNS: tuple[str, ...] = ("workflow_id", "step_name", "join_when", "parents_open", "status")
STEP_FRESH = tuple((n, v) for n, v in FRESH_COLUMNS if n != "status")
STEP_COLUMN_LIST = ", ".join([*ROW_COLUMNS, *STEP_COLUMNS, *(name for name, _ in STEP_FRESH)])


class StorageStatements(WakeupStatements):
    """What every database's dialect answers for inserts, rate tokens, journal deletion,
    percentiles, wake-ups, connection errors and transactions."""

    # --- what the system checks ask, of a DATABASES entry, without connecting -------------

    #: The oldest server version the claim runs on, and what of it the claim needs.
    minimum_version: ClassVar[tuple[int, ...]] = ()
    claim_needs: ClassVar[str] = ""
    #: Whether one writer at a time holds the whole database: a transaction that has
    #: written makes every other writer (a claim, a lease renewal) wait until it ends.
    one_writer: ClassVar[bool] = False
    #: Whether a settlement's statement writes its runs' log lines itself (and deletes
    #: older runs'): else ``store.runlogs`` writes them after it, in its transaction.
    settles_run_logs: ClassVar[bool] = False

    @classmethod
    def configuration_problems(
        cls, alias: str, database: Mapping[str, Any], *, concurrency: int
    ) -> list[CheckMessage]:
        """The system check warnings this database's settings earn (none by default)."""
        return []

    @classmethod
    def pooled_reason(cls, database: Mapping[str, Any]) -> str | None:
        """Why ``database`` looks like it goes through a transaction pooler, or None."""
        return None

    @classmethod
    def listens(cls) -> bool:
        """Whether this database can wake workers (else they poll)."""
        return False

    def server(self) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
        """The server's name, its version and the oldest one the claim runs on (connects)."""
        version = tuple(self.conn.get_database_version())
        return self.conn.vendor, version, self.minimum_version

    # --- inserts -----------------------------------------------------------------------

    #: How a statement binds a JSON value (as text by default).
    json_mark: ClassVar[str] = "%s"
    #: The most parameters one statement binds (SQLite's limit; MySQL's is twice that).
    max_params: ClassVar[int] = 32766
    #: The most bytes of payload one multi-row insert carries (None: no limit but the
    #: parameters').
    statement_bytes: ClassVar[int | None] = None

    def insert_sql(self, rows: int) -> str:
        """An INSERT of ``rows`` new jobs, each bound as ``row_params`` (one row's, an
        enqueue's, made once)."""
        if rows == 1:
            return self._insert_one
        return f"INSERT INTO {JOB} ({COLUMN_LIST}) VALUES " + ", ".join([self._row_marks] * rows)

    @cached_property
    def _row_marks(self) -> str:
        marks = ["%s"] * len(ROW_COLUMNS)
        marks[ROW_COLUMNS.index("payload")] = self.json_mark
        return "(" + ", ".join([*marks, *(value for _, value in FRESH_COLUMNS)]) + ")"

    @cached_property
    def _insert_one(self) -> str:
        return f"INSERT INTO {JOB} ({COLUMN_LIST}) VALUES {self._row_marks}"

    def row_params(self, row: NewRow) -> list[Any]:
        """``row``'s values in ``ROW_COLUMNS`` order, as this database binds them."""
        return [bind(getattr(row, name)) for name, bind in self._binders]

    @cached_property
    def _binders(self) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
        """Each of ``ROW_COLUMNS`` with how this database binds its value."""
        bind: dict[str, Callable[[Any], Any]] = {
            "id": self.job_id,
            "created_at": self.dt,
            "visible_at": self.dt,
        }
        return tuple((name, bind.get(name, _as_is)) for name in ROW_COLUMNS)

    def insert_jobs(self, rows: Iterable[NewRow]) -> None:
        """Insert plain new jobs (no idempotency key): multi-row VALUES, in statements
        within the database's parameter limit and ``statement_bytes`` of payload (the
        rows read once, as they come)."""
        step = max(1, self.max_params // len(ROW_COLUMNS))
        budget = self.statement_bytes
        count, size = 0, 0
        params: list[Any] = []
        for row in rows:
            length = len(row.payload)  # by far the largest value
            if count and (count == step or (budget is not None and size + length > budget)):
                self.run(self.insert_sql(count), params)
                count, size, params = 0, 0, []
            params.extend(self.row_params(row))
            count += 1
            size += length
        if count:
            self.run(self.insert_sql(count), params)

    def insert_steps(self, steps: Sequence[NewStep]) -> None:
        """Insert a workflow's new steps: multi-row VALUES, in statements within the
        parameter limit and ``statement_bytes`` of payload (as ``insert_jobs``)."""
        width = len(ROW_COLUMNS) + len(STEP_COLUMNS)
        marks = ["%s"] * width
        marks[ROW_COLUMNS.index("payload")] = self.json_mark
        one = "(" + ", ".join([*marks, *(value for _, value in STEP_FRESH)]) + ")"
        step, budget = max(1, self.max_params // width), self.statement_bytes
        head = f"INSERT INTO {JOB} ({STEP_COLUMN_LIST}) VALUES "
        count, size = 0, 0
        params: list[Any] = []
        for s in steps:
            length = len(s.row.payload)
            if count and (count == step or (budget is not None and size + length > budget)):
                self.run(head + ", ".join([one] * count), params)
                count, size, params = 0, 0, []
            params += self.row_params(s.row)
            params += [self.job_id(s.workflow_id), s.step_name, s.join_when, s.parents_open]
            params.append(s.status)
            count += 1
            size += length
        if count:
            self.run(head + ", ".join([one] * count), params)

    def insert_graph(
        self, steps: Sequence[NewStep], edges: Sequence[tuple[Any, Any, Any]], *, batch: int
    ) -> None:
        """Insert a workflow's steps, then its edges, ``batch`` rows a call (an edge's
        parent and child exist before it, for a database that checks keys at once)."""
        for start in range(0, len(steps), batch):
            self.insert_steps(steps[start : start + batch])
        for start in range(0, len(edges), batch):
            self.insert_edges(edges[start : start + batch])

    def insert_edges(self, edges: Sequence[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]) -> None:
        """Insert a workflow's edges, (workflow id, parent id, child id) each: multi-row
        VALUES within the parameter limit."""
        step = self.max_params // 3
        for start in range(0, len(edges), step):
            chunk = edges[start : start + step]
            params = [self.job_id(v) for edge in chunk for v in edge]
            self.run(
                f"INSERT INTO {EDGE} (workflow_id, parent_id, child_id) VALUES "
                + ", ".join(["(%s, %s, %s)"] * len(chunk)),
                params,
            )

    def insert_keyed(self, row: NewRow, *, unique: UniqueConstraint) -> bool:
        """Insert ``row`` unless an active job holds its key under ``unique`` (a partial
        unique constraint of the model); whether it was inserted. ``ON CONFLICT DO
        NOTHING`` on the constraint's index, so a lost race neither raises nor spoils
        the caller's transaction."""
        fields = ", ".join(unique.fields)
        conflict = (
            f" ON CONFLICT ({fields}) WHERE {self.condition_sql(unique)} DO NOTHING RETURNING id"
        )
        return bool(self.run(self.insert_sql(1) + conflict, self.row_params(row)))

    def condition_sql(self, unique: UniqueConstraint) -> str:
        """The constraint's condition as this database's index has it: compiled from the
        model (``Q``) as Django compiles it for the index, with its values written in as
        literals. ON CONFLICT infers the partial index only from constants (a bound
        parameter matches no index); they come from the model's code, never a caller.
        Compiled once per dialect (a keyed enqueue asks every time)."""
        known: dict[str, str] = self.__dict__.setdefault("_conditions", {})
        found = known.get(unique.name)
        if found is None:
            assert isinstance(unique.condition, Q)
            query = Query(model=Job, alias_cols=False)
            where = query.build_where(unique.condition)
            compiled, params = where.as_sql(query.get_compiler(connection=self.conn), self.conn)
            editor = self.conn.schema_editor()
            found = known[unique.name] = str(
                compiled % tuple(editor.quote_value(p) for p in params)
            )
        return found

    # --- rate tokens -------------------------------------------------------------------

    def _clock(self) -> tuple[str, list[Any]]:
        """The bucket's clock, in epoch seconds: this process's (one machine)."""
        return "%s", [time.time()]

    _greatest: ClassVar[str] = "max"
    _least: ClassVar[str] = "min"

    def take_tokens(self, *, kind: str, capacity: int, refill: float, count: int) -> float | None:
        """Take ``count`` tokens from ``kind``'s bucket (of ``capacity``, refilled at
        ``refill`` per second) in the current transaction: None if taken, else the
        seconds until they are there; nothing is written when they are not taken. One
        upsert that refills and takes only if there are enough; a clock behind the
        bucket's never runs it backwards."""
        now, now_params = self._clock()
        big, small = self._greatest, self._least
        available = f"{small}(%s, {BUCKET}.tokens + {big}({now} - {BUCKET}.refilled_at, 0) * %s)"
        available_params = [capacity, *now_params, refill]
        statement = (
            f"INSERT INTO {BUCKET} (kind, tokens, refilled_at) VALUES (%s, %s, {now})"
            f" ON CONFLICT (kind) DO UPDATE SET tokens = {available} - %s,"
            f" refilled_at = {big}({BUCKET}.refilled_at, {now})"
            f" WHERE {available} >= %s RETURNING tokens"
        )
        params = [
            *(kind, capacity - count, *now_params),
            *(*available_params, count, *now_params),
            *(*available_params, count),
        ]
        if self.run(statement, params):
            return None
        rows = self.run(
            f"SELECT {available} FROM {BUCKET} WHERE kind = %s", [*available_params, kind]
        )
        have = float(rows[0][0]) if rows else 0.0
        return max(count - have, 0.0) / refill

    # --- merge locks -------------------------------------------------------------------

    def lock_merge(self, name: str) -> None:
        """Lock ``name``'s merge-lock row until the current transaction ends, making it
        first if it is new. One upsert: its update takes the row's write lock, waiting
        for (never skipping) a transaction that holds it or is inserting it; on SQLite
        the write takes the database's one write lock instead."""
        self.run(
            f"INSERT INTO {MERGE_LOCK} (name) VALUES (%s)"
            " ON CONFLICT (name) DO UPDATE SET name = excluded.name",
            [name],
        )

    # --- durable steps' records --------------------------------------------------------

    def append_record(
        self, *, guard: Fragment, clear: str | None, job_id: uuid.UUID, record: str
    ) -> bool:
        """Hold the job's row under its run's ``guard`` (a WHERE condition) and, only if
        the guard holds, append ``record`` (JSON text) to the job's step records; with
        ``clear`` (a SET list) the row is updated with it too. Both or neither, in one
        transaction (a savepoint in the caller's); whether the guard held. The row's
        write lock is taken (an UPDATE, here with no change when there is nothing to
        clear), so a claim taken over meanwhile is waited for and then fails the guard,
        as a settlement's does."""
        changes = clear or "run_count = run_count"
        with transaction.atomic(using=self.conn.alias), self.conn.cursor() as cursor:
            cursor.execute(f"UPDATE {JOB} SET {changes} WHERE {guard.sql}", guard.params)
            if not cursor.rowcount:
                return False
            cursor.execute(
                f"INSERT INTO {RECORD} (job_id, record, size) VALUES (%s, {self.json_mark}, %s)",
                [self.job_id(job_id), record, len(record)],
            )
        return True

    def append_stream(self, *, guard: Fragment, item: NewStreamItem, channel: str) -> bool:
        """Hold the job's row under its run's ``guard`` and, only if it holds, append
        ``item`` at the stream's next offset (the last one plus one, read in the same
        statement as the insert), then notify ``channel`` with the job id (a no-op
        where readers poll): one transaction (a savepoint in the caller's); whether the
        guard held."""
        with transaction.atomic(using=self.conn.alias):
            if not self.hold_job(guard=guard):
                return False
            key = self.job_id(item.job_id)
            statement = (
                f"{self.stream_insert()} SELECT %s, COALESCE(MAX({self.stream_column('offset')}),"
                f" 0) + 1, {self.json_mark}, %s, %s, '', %s, %s FROM {STREAM} WHERE"
                f" {self.stream_column('job')} = %s"
            )
            values = [item.value, len(item.value), item.run, item.write_no]
            self.run(statement, [key, *values, self.dt(item.written_at), key])
            self.notify(channel, str(item.job_id))
        return True

    def stream_column(self, name: str) -> str:
        """A stream item's column by its field's name, quoted for this database."""
        columns = {f.name: str(f.column) for f in StreamItem._meta.concrete_fields}
        return str(self.conn.ops.quote_name(columns[name]))

    def stream_insert(self) -> str:
        """``INSERT INTO`` the stream items' table with ``STREAM_COLUMNS``."""
        names = ", ".join(self.stream_column(c) for c in STREAM_COLUMNS)
        return f"INSERT INTO {STREAM} ({names})"

    def hold_job(self, *, guard: Fragment) -> bool:
        """Take the write lock of the job row that ``guard`` (a WHERE condition) finds,
        until the current transaction ends; whether it found it. An UPDATE with no
        change, so a claim taken over meanwhile is waited for and then fails the guard,
        as ``append_record``'s does."""
        with self.conn.cursor() as cursor:
            cursor.execute(
                f"UPDATE {JOB} SET run_count = run_count WHERE {guard.sql}", guard.params
            )
            return bool(cursor.rowcount)

    # --- the journal and what is read of it ---------------------------------------------

    def delete_journal(self, job_ids: Sequence[uuid.UUID]) -> None:
        """Delete the journal entries of these jobs, in the caller's transaction."""
        if not job_ids:
            return
        of_jobs, ids = self.in_list("job_id", [self.job_id(i) for i in job_ids])
        self.run(f"DELETE FROM {JOURNAL} WHERE {of_jobs}", ids)

    def percentiles(
        self, qs: QuerySet[JournalEntry]
    ) -> dict[str, tuple[float | None, float | None]]:
        """Per kind, the p50 and p95 of the entries' durations in seconds: counted here,
        as PostgreSQL's ``percentile_cont`` counts them."""
        by_kind: dict[str, list[float]] = {}
        for kind, duration in qs.values_list("kind", "duration"):
            if duration is not None:
                by_kind.setdefault(kind, []).append(duration.total_seconds())
        return {
            kind: (percentile(sorted(v), 0.5), percentile(sorted(v), 0.95))
            for kind, v in by_kind.items()
        }

    def planned_rows(self, qs: QuerySet[Any]) -> int | None:
        """The planner's estimate of the rows ``qs`` returns; None where the database
        gives none (then counts are exact)."""
        return None

    # --- row locks and deadlocks ---------------------------------------------------------

    def locked(self, qs: QuerySet[M], *, skip_locked: bool) -> QuerySet[M]:
        """``qs`` with row locks (skipping locked rows if asked), as far as the database
        has them."""
        features = self.conn.features
        if not features.has_select_for_update:
            return qs
        if skip_locked and features.has_select_for_update_skip_locked:
            return qs.select_for_update(skip_locked=True)
        return qs.select_for_update()

    def retrying_deadlocks(self, run: Callable[[], T], *, attempts: int = 5) -> T:
        """``run()`` (one transaction of its own), run again where the database may pick
        it as a deadlock's victim; here it cannot, and errors pass through."""
        return run()

    def json_depth_cap(self) -> tuple[int, str] | None:
        """How many levels the JSON columns nest a document, and whose limit that is;
        None where they hold deeper than any reader decodes."""
        return None

    # --- connection errors and the transaction of an atomic run --------------------------

    def is_connection_error(self, exc: BaseException) -> bool:
        """Whether a database error is the connection's (or transient: a lock, a
        serialisation failure, a deadlock), so the call may be tried again on a new
        connection; any other error is the statement's."""
        if isinstance(exc, OperationalError | InterfaceError):
            return True
        if not isinstance(exc, DatabaseError):
            return False
        text = str(exc).lower()
        return "locked" in text or "could not serialize" in text or "deadlock" in text

    @contextlib.contextmanager
    def atomic_run_mode(self) -> Iterator[None]:
        """Around an atomic run's ``transaction.atomic()``: how its transaction must
        begin (as the connection says, by default)."""
        yield


def _as_is(value: Any) -> Any:
    return value


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile of sorted ``values``, as PostgreSQL's
    ``percentile_cont``."""
    if not values:
        return None
    pos = (len(values) - 1) * q
    low = int(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)
