"""The one interface every database's dialect implements, and what they share.

A dialect is the *how* of the queue's statements on one database: the store's modules
keep the *what* (candidates, guards, tiers, the lifecycle) and ask the dialect for the
SQL and the conversions that differ. The interface is written in two halves, each in
its own module: ``claiming`` (claims, turns and settlements: the hot path) and
``storage`` (inserts, rate tokens, journal deletion, percentiles, wake-ups, the
classification of connection errors, the transaction an atomic run needs, and the
rest). Every statement's values are bound parameters.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.dateparse import parse_datetime

from django_jobqueue.store.dialects.base.claiming import ClaimingStatements
from django_jobqueue.store.dialects.base.storage import StorageStatements


class Dialect(ClaimingStatements, StorageStatements):
    """One database's way of running the queue's statements, for one connection alias."""

    vendor: ClassVar[str] = ""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def __repr__(self) -> str:
        return f"<{type(self).__name__} dialect of {self.alias!r}>"

    @property
    def conn(self) -> BaseDatabaseWrapper:
        """This thread's connection to the alias (Django's connections are per thread)."""
        return connections[self.alias]

    @property
    def pooled(self) -> bool:
        return False

    @property
    def prepare(self) -> bool:
        return False

    def run(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run one statement through a Django cursor; its rows (none if it returns none)."""
        with self.conn.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def job_id(self, value: uuid.UUID) -> Any:
        """A job id as a raw statement binds it: char(32) hex where UUIDs are text."""
        return value.hex

    def dt(self, value: datetime | None) -> Any:
        if value is None:
            return value
        return self.conn.ops.adapt_datetimefield_value(value)

    def read_uuid(self, value: Any) -> uuid.UUID:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))

    def read_dt(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, datetime):
            return value
        parsed = parse_datetime(str(value))
        if parsed is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``: a list of parameters (one array on PostgreSQL)."""
        marks = ", ".join(["%s"] * len(values))
        return f"{column} IN ({marks})", list(values)
