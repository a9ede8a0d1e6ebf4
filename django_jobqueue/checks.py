"""System checks: a bad JOBQUEUE setting fails ``check``/``runworker`` at startup, and a
SQLite database that would let concurrent claims fail is pointed out."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

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
