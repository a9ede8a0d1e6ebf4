"""System checks: a bad JOBQUEUE setting fails ``check``/``runworker`` at startup, a
SQLite database that would let concurrent claims fail is pointed out, and so is what
differs on MySQL/MariaDB (and a server too old to claim at all)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import connections

from . import conf
from .errors import ConfigurationError


@register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        conf.validate(getattr(settings, "JOBQUEUE", None))
    except ConfigurationError as exc:
        return [Error(str(exc), id="django_jobqueue.E001", hint="See the settings reference.")]
    return []


@register()
def check_sqlite_transaction_mode(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Deferred SQLite transactions make a second writer fail with "database is locked"
    instead of waiting its turn; IMMEDIATE ones queue claims up."""
    try:
        alias = conf.validate(getattr(settings, "JOBQUEUE", None)).database
    except ConfigurationError:
        return []  # reported by check_settings
    return sqlite_warnings(alias, settings.DATABASES[alias])


def sqlite_warnings(alias: str, database: dict[str, Any]) -> list[CheckMessage]:
    if not database.get("ENGINE", "").endswith("sqlite3"):
        return []
    mode = str(database.get("OPTIONS", {}).get("transaction_mode", "")).upper()
    if mode == "IMMEDIATE":
        return []
    return [
        Warning(
            f"Database {alias!r} is SQLite without transaction_mode IMMEDIATE: a worker "
            "claiming beside another writer fails with 'database is locked' and retries "
            "instead of waiting its turn.",
            hint=f'Set DATABASES[{alias!r}]["OPTIONS"]["transaction_mode"] = "IMMEDIATE".',
            id="django_jobqueue.W001",
        )
    ]


@register()
def check_admin_apps(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The job admin's date-time range filters are django-admin-rangefilter's: with the
    admin installed, its app must be too (for its templates and static files)."""
    from django.apps import apps

    if not apps.is_installed("django.contrib.admin") or apps.is_installed("rangefilter"):
        return []
    return [
        Error(
            "The job queue's admin needs 'rangefilter' (django-admin-rangefilter) in "
            "INSTALLED_APPS for its date-time range filters.",
            hint='Add "rangefilter" to INSTALLED_APPS (before or after "django_jobqueue").',
            id="django_jobqueue.E002",
        )
    ]


def _jobs_alias() -> str | None:
    try:
        return conf.validate(getattr(settings, "JOBQUEUE", None)).database
    except ConfigurationError:
        return None  # reported by check_settings


@register()
def check_mysql_features(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """On MySQL/MariaDB the queue runs with a few differences: say which."""
    alias = _jobs_alias()
    if alias is None or alias not in settings.DATABASES:
        return []
    return mysql_warnings(alias, settings.DATABASES[alias])


def mysql_warnings(alias: str, database: dict[str, Any]) -> list[CheckMessage]:
    if not database.get("ENGINE", "").endswith("mysql"):
        return []
    isolation = str((database.get("OPTIONS") or {}).get("isolation_level") or "read committed")
    messages: list[CheckMessage] = []
    if isolation.lower() not in ("read committed", "read uncommitted"):
        messages.append(
            Warning(
                f"Database {alias!r} is MySQL/MariaDB at isolation level {isolation!r}: an "
                "enqueue whose idempotency key another transaction has just taken cannot "
                "see that job from its older snapshot (it fails instead of reusing it), "
                "and locking reads take gap locks that slow concurrent claims.",
                hint=f"Remove DATABASES[{alias!r}]['OPTIONS']['isolation_level'] (Django's "
                "default for MySQL is 'read committed') or set it to 'read committed'.",
                id="django_jobqueue.W011",
            )
        )
    return [
        *messages,
        Warning(
            f"Database {alias!r} is MySQL/MariaDB: jobs are claimed with SKIP LOCKED and "
            "settled under their guard as on PostgreSQL, but idle workers poll (no "
            "LISTEN/NOTIFY: a new job waits up to POLL_INTERVAL), the indexes are whole "
            "rather than partial (larger; the idempotency key's uniqueness is a generated "
            "column's unique index), a claim or settlement takes a few statements instead "
            "of one, and JSON is stored as checked text.",
            hint="See docs/databases.md for the feature-by-database table; add "
            "'django_jobqueue.W010' to SILENCED_SYSTEM_CHECKS once you have read it.",
            id="django_jobqueue.W010",
        ),
    ]


@register(Tags.database)
def check_mysql_version(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """MariaDB before 10.6 and MySQL before 8 lack SKIP LOCKED: the claim cannot run.
    Needs a connection, so it runs where Django checks databases (``migrate``, ``check
    --database``, the test runner)."""
    alias = _jobs_alias()
    if alias is None or alias not in (databases or ()):
        return []
    connection = connections[alias]
    if connection.vendor != "mysql":
        return []
    mariadb = bool(getattr(connection, "mysql_is_mariadb", False))
    version = tuple(getattr(connection, "mysql_version", ()))
    return mysql_version_errors(alias, mariadb=mariadb, version=version)


def mysql_version_errors(
    alias: str, *, mariadb: bool, version: tuple[int, ...]
) -> list[CheckMessage]:
    needed = (10, 6) if mariadb else (8, 0, 1)
    if version >= needed:
        return []
    server = "MariaDB" if mariadb else "MySQL"
    shown = ".".join(str(part) for part in version)
    return [
        Error(
            f"Database {alias!r} is {server} {shown}, which has no SELECT … FOR UPDATE SKIP "
            "LOCKED: workers cannot claim jobs without blocking one another.",
            hint=f"Upgrade to {server} {'.'.join(str(p) for p in needed)} or later, or put "
            "the jobs in PostgreSQL (JOBQUEUE['DATABASE']).",
            id="django_jobqueue.E010",
        )
    ]
