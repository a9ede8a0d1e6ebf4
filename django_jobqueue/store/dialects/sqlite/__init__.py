"""SQLite: the embedded default. Writers are serialised by the database (BEGIN
IMMEDIATE), so claims take no row locks."""

from __future__ import annotations

from typing import ClassVar

from django_jobqueue.store.dialects.base import Dialect
from django_jobqueue.store.dialects.sqlite.claiming import SQLiteClaiming
from django_jobqueue.store.dialects.sqlite.storage import SQLiteStorage


class SQLite(SQLiteClaiming, SQLiteStorage, Dialect):
    vendor: ClassVar[str] = "sqlite"
