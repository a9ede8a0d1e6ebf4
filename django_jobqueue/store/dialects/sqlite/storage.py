"""SQLite's storage half of its dialect (see ``dialects.base``): the portable statements
of the base, no row locks (writers are serialised), and the atomic run's transaction
begun DEFERRED."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, TypeVar

from django.core.checks import CheckMessage, Warning
from django.db.models import QuerySet

from django_jobqueue.store.dialects.base.storage import StorageStatements

M = TypeVar("M", bound=Any)


class SQLiteStorage(StorageStatements):
    """SQLite: inserts, tokens, journal deletion, percentiles, wake-ups, errors, transactions."""

    minimum_version: ClassVar[tuple[int, ...]] = (3, 35)
    claim_needs: ClassVar[str] = "UPDATE ... RETURNING over MATERIALIZED subqueries"
    one_writer: ClassVar[bool] = True

    @classmethod
    def configuration_problems(
        cls, alias: str, database: Mapping[str, Any], *, concurrency: int
    ) -> list[CheckMessage]:
        """W001 without IMMEDIATE transactions; W002 with more than one job at a time."""
        messages: list[CheckMessage] = []
        mode = str((database.get("OPTIONS") or {}).get("transaction_mode", "")).upper()
        if mode != "IMMEDIATE":
            messages.append(
                Warning(
                    f"Database {alias!r} is SQLite without transaction_mode IMMEDIATE: a "
                    "worker claiming beside another writer fails with 'database is locked' "
                    "and retries instead of waiting its turn.",
                    hint=f'Set DATABASES[{alias!r}]["OPTIONS"]["transaction_mode"] = "IMMEDIATE".',
                    id="django_jobqueue.W001",
                )
            )
        if concurrency > 1:
            messages.append(
                Warning(
                    f"The jobs database {alias!r} is SQLite and workers run {concurrency} "
                    "jobs at once: SQLite lets one connection write at a time, so jobs that "
                    "write wait on each other and, past the database timeout, fail with "
                    "'database is locked'.",
                    hint="Set JOBQUEUE['CONCURRENCY'] = 1 (or run runworker --concurrency 1), "
                    "or use PostgreSQL for parallel jobs. The default concurrency is 8.",
                    id="django_jobqueue.W002",
                )
            )
        return messages

    def locked(self, qs: QuerySet[M], *, skip_locked: bool) -> QuerySet[M]:
        """No row locks: SQLite serialises writers instead."""
        return qs

    @contextlib.contextmanager
    def atomic_run_mode(self) -> Iterator[None]:
        """Begin the run's transaction DEFERRED whatever ``transaction_mode`` says: it then
        takes the database's one write lock at its first write rather than for the whole
        run, so the worker loop's own writes (claims, lease renewals) wait only while the
        task writes."""
        conn = self.conn
        conn.ensure_connection()
        mode = conn.transaction_mode  # type: ignore[attr-defined]
        conn.transaction_mode = None  # type: ignore[attr-defined]
        try:
            yield
        finally:
            conn.transaction_mode = mode  # type: ignore[attr-defined]
