"""What both halves of a dialect stand on: the alias, this thread's connection, running
one statement, and the value conversions that differ between databases (each
database's class overrides the ones it does differently)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.dateparse import parse_datetime


class Primitives:
    """The portable way of each primitive, for one connection alias."""

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
            # Naive where SQLite's driver converts a column's declared type itself (a
            # scalar subquery's): UTC, as the text below.
            return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        parsed = parse_datetime(str(value))
        if parsed is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed

    def in_list(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``: a list of parameters (one array on PostgreSQL)."""
        marks = ", ".join(["%s"] * len(values))
        return f"{column} IN ({marks})", list(values)
