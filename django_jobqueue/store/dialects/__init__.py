"""The databases' dialects: one class per database behind one interface, the only code
that knows PostgreSQL from SQLite from MySQL/MariaDB.

``for_alias(alias)`` resolves a connection alias's dialect once and caches it: the hot
paths ask on every call. A dialect holds the alias, never a connection (Django's
connections are per thread), and reads ``connections[alias]`` when it runs.
"""

from __future__ import annotations

from django.core.signals import setting_changed
from django.db import connections

from django_jobqueue.store.dialects.base import Dialect
from django_jobqueue.store.dialects.mysql import MySQL
from django_jobqueue.store.dialects.postgresql import PostgreSQL
from django_jobqueue.store.dialects.sqlite import SQLite

__all__ = ["Dialect", "MySQL", "PostgreSQL", "SQLite", "for_alias"]

_BY_VENDOR: dict[str, type[Dialect]] = {
    "postgresql": PostgreSQL,
    "sqlite": SQLite,
    "mysql": MySQL,
}
_cache: dict[str, Dialect] = {}


def for_alias(alias: str) -> Dialect:
    """The dialect of database ``alias`` (resolved once, then cached)."""
    try:
        return _cache[alias]
    except KeyError:
        pass
    vendor = connections[alias].vendor
    try:
        cls = _BY_VENDOR[vendor]
    except KeyError:
        raise NotImplementedError(
            f"django_jobqueue does not support the {vendor!r} database of alias {alias!r}: "
            "use PostgreSQL, SQLite or MySQL/MariaDB"
        ) from None
    dialect = _cache[alias] = cls(alias)
    return dialect


def _forget(*, setting: str, **_: object) -> None:
    """Tests that swap DATABASES get the new databases' dialects."""
    if setting == "DATABASES":
        _cache.clear()


setting_changed.connect(_forget)
