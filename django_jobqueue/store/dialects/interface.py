"""What the rest of the package asks of a database's dialect, and nothing more: one flat
``Protocol``, grouped by concern. ``sql.dialect()`` and ``for_alias`` are typed with it,
so a store module that reaches for a dialect's internals fails the type check, and a
new database is the list below implemented (CONTRIBUTING.md, "Adding a database"). The
classes in ``base`` are its portable implementation, which each database's overrides.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from django.core.checks import CheckMessage
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models import Model, QuerySet, UniqueConstraint

    from django_jobqueue.models import JournalEntry
    from django_jobqueue.store.dialects.base.fragment import Fragment
    from django_jobqueue.store.dialects.base.health import Holder, TableReading, Threshold, Upkeep
    from django_jobqueue.store.dialects.base.partitions import JournalLayout
    from django_jobqueue.store.dialects.base.settling import Release, Released, SettleRow, Tally
    from django_jobqueue.store.dialects.base.spec import ClaimSpec
    from django_jobqueue.store.dialects.base.storage import NewRow, NewStep, NewStreamItem
    from django_jobqueue.store.dialects.base.wakeups import Hearing, Wakeups

T = TypeVar("T")
M = TypeVar("M", bound="Model")


class Interface(Protocol):
    """A database's dialect as the store, the worker and the checks use it."""

    # --- the connection, and values as its statements bind and return them ------------

    @property
    def conn(self) -> BaseDatabaseWrapper: ...

    def run(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    def job_id(self, value: uuid.UUID) -> Any: ...

    def dt(self, value: datetime | None) -> Any: ...

    def read_uuid(self, value: Any) -> uuid.UUID: ...

    def read_dt(self, value: Any) -> datetime | None: ...

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]: ...

    # --- the claim and the worker's turn ------------------------------------------------

    def claim(self, spec: ClaimSpec) -> list[tuple[Any, ...]]: ...

    def claim_statement(self, spec: ClaimSpec) -> Fragment: ...

    def candidates(
        self, spec: ClaimSpec, *, kinds: Sequence[str] | Fragment, floor: int
    ) -> Fragment: ...

    def turn(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec
    ) -> tuple[set[uuid.UUID], list[tuple[Any, ...]]]: ...

    def turn_statement(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec
    ) -> Fragment | None: ...

    def use_generic_plans(self) -> None: ...

    # --- settlements and the release of a workflow's steps ------------------------------

    def apply_settlements(self, rows: Sequence[SettleRow], tally: Tally) -> set[uuid.UUID]: ...

    def settle_statement(self, rows: Sequence[SettleRow], tally: Tally) -> Fragment: ...

    def skipping_locked(self, select: Fragment) -> Fragment: ...

    def turn_releasing(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec, release: Release
    ) -> Released | None: ...

    def releasing_statement(
        self, rows: Sequence[SettleRow], tally: Tally, spec: ClaimSpec, release: Release
    ) -> Fragment | None: ...

    # --- inserts, durable steps' records, merges and locks ------------------------------

    def insert_jobs(self, rows: Iterable[NewRow]) -> None: ...

    def insert_keyed(self, row: NewRow, *, unique: UniqueConstraint) -> bool: ...

    def insert_steps(self, steps: Sequence[NewStep]) -> None: ...

    def insert_edges(self, edges: Sequence[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]) -> None: ...

    def insert_graph(
        self, steps: Sequence[NewStep], edges: Sequence[tuple[Any, Any, Any]], *, batch: int
    ) -> None: ...

    def append_record(
        self, *, guard: Fragment, clear: str | None, job_id: uuid.UUID, record: str
    ) -> bool: ...

    def hold_job(self, *, guard: Fragment) -> bool: ...

    def append_stream(self, *, guard: Fragment, item: NewStreamItem, channel: str) -> bool: ...

    def lock_merge(self, name: str) -> None: ...

    def locked(self, qs: QuerySet[M], *, skip_locked: bool) -> QuerySet[M]: ...

    def delete_journal(self, job_ids: Sequence[uuid.UUID]) -> None: ...

    # --- rate tokens --------------------------------------------------------------------

    def take_tokens(
        self, *, kind: str, capacity: int, refill: float, count: int
    ) -> float | None: ...

    # --- wake-ups -----------------------------------------------------------------------

    def listens(self) -> bool: ...

    def listen(self, channel: str, *more: str) -> Wakeups: ...

    def listens_here(self) -> bool: ...

    def listen_here(self, channel: str, on_note: Callable[[str, str], None]) -> Hearing: ...

    def notify(self, channel: str, payload: str) -> None: ...

    def announce(self, channel: str, ids: Iterable[object]) -> None: ...

    # --- reading for the operators' pages -----------------------------------------------

    def percentiles(
        self, qs: QuerySet[JournalEntry]
    ) -> dict[str, tuple[float | None, float | None]]: ...

    def planned_rows(self, qs: QuerySet[Any]) -> int | None: ...

    # --- the tables' health -------------------------------------------------------------

    @property
    def health_notes(self) -> tuple[str, ...]: ...

    def table_readings(self, tables: Sequence[str]) -> list[TableReading]: ...

    def free_bytes(self) -> int | None: ...

    def horizon_holders(self, older_than: timedelta) -> list[Holder] | None: ...

    def upkeep_due(
        self, table: str, *, analyze: Threshold, vacuum: Threshold, changed_every: timedelta
    ) -> Upkeep: ...

    def gather_statistics(self, table: str, *, lock: tuple[int, int]) -> bool: ...

    def vacuum_table(self, table: str) -> bool: ...

    # --- the journal's partitions (PostgreSQL's; elsewhere none, and changes refused) --

    def journal_layout(self) -> JournalLayout | None: ...

    def partition_journal(
        self, *, period: str, bounds: Sequence[tuple[datetime, datetime]], partitioned: bool
    ) -> int: ...

    def add_journal_partition(
        self, lower: datetime, upper: datetime, *, wait: timedelta
    ) -> bool: ...

    def drop_journal_partition(self, name: str, *, wait: timedelta) -> bool: ...

    def delete_default_journal(self, *, before: datetime) -> int: ...

    # --- errors -------------------------------------------------------------------------

    def is_connection_error(self, exc: BaseException) -> bool: ...

    def retrying_deadlocks(self, run: Callable[[], T], *, attempts: int = 5) -> T: ...

    # --- capabilities and the checks ----------------------------------------------------

    @property
    def one_writer(self) -> bool: ...

    @property
    def settles_run_logs(self) -> bool: ...

    @property
    def claim_needs(self) -> str: ...

    def server(self) -> tuple[str, tuple[int, ...], tuple[int, ...]]: ...

    def json_depth_cap(self) -> tuple[int, str] | None: ...

    def atomic_run_mode(self) -> AbstractContextManager[None]: ...

    def pooled_reason(self, database: Mapping[str, Any]) -> str | None: ...

    def configuration_problems(
        self, alias: str, database: Mapping[str, Any], *, concurrency: int
    ) -> list[CheckMessage]: ...
