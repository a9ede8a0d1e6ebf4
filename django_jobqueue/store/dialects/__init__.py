"""The databases' dialects: one class per database behind one interface, the only code
that knows PostgreSQL from SQLite from MySQL/MariaDB.

``for_alias(alias)`` resolves a connection alias's dialect once and caches it: the hot
paths ask on every call. A dialect holds the alias, never a connection (Django's
connections are per thread), and reads ``connections[alias]`` when it runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.signals import setting_changed
from django.db import connections
from django.db.utils import load_backend

from django_jobqueue.store.dialects.base import Dialect
from django_jobqueue.store.dialects.interface import Interface
from django_jobqueue.store.dialects.mysql import MySQL
from django_jobqueue.store.dialects.postgresql import PostgreSQL
from django_jobqueue.store.dialects.sqlite import SQLite

__all__ = [
    "Dialect",
    "Interface",
    "MySQL",
    "PostgreSQL",
    "SQLite",
    "for_alias",
    "for_settings",
    "supported_servers",
]

_BY_VENDOR: dict[str, type[Dialect]] = {
    "postgresql": PostgreSQL,
    "sqlite": SQLite,
    "mysql": MySQL,
}
_cache: dict[str, Dialect] = {}


def for_alias(alias: str) -> Interface:
    """The dialect of database ``alias`` (resolved once, then cached), as the package
    may use it (``Interface``)."""
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


def for_settings(database: Mapping[str, Any]) -> type[Dialect] | None:
    """The dialect class of a ``DATABASES`` entry, read from its ENGINE without
    connecting (what the system checks ask); None for a database the queue does not run
    on. ``ImproperlyConfigured`` when the ENGINE does not import."""
    backend = load_backend(str(database.get("ENGINE", "")))
    return _BY_VENDOR.get(backend.DatabaseWrapper.vendor)


#: The oldest server version the claim runs on, by Django's vendor name.
MINIMUM_VERSIONS: dict[str, tuple[int, ...]] = {
    vendor: cls.minimum_version for vendor, cls in _BY_VENDOR.items()
}


def supported_servers() -> str:
    """The databases the queue runs on, and the oldest version of each, as a sentence."""
    versions = [
        f"{vendor} {'.'.join(map(str, least))}+" for vendor, least in MINIMUM_VERSIONS.items()
    ]
    mariadb = ".".join(map(str, MySQL.mariadb_minimum))
    return ", ".join(versions) + f" (MariaDB {mariadb}+)"


def _forget(*, setting: str, **_: object) -> None:
    """Tests that swap DATABASES get the new databases' dialects."""
    if setting == "DATABASES":
        _cache.clear()


setting_changed.connect(_forget)
