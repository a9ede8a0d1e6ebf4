"""System checks (``manage.py check``, and at ``runworker``'s start).

Errors: a bad JOBQUEUE setting (E001), the admin without rangefilter (E002), a jobs
database that cannot run the claim (E003: of another kind, or too old, such as a
MariaDB before 10.6 or a MySQL before 8.0.1 without SKIP LOCKED), task kinds that
differ only in case (E004), a periodic schedule that does not fit its task (E005).
Warnings: SQLite without IMMEDIATE transactions (W001) or with more than one job at a
time (W002), wake-ups that would LISTEN through a transaction pooler (W003), one task
registered under two kinds by a double import (W004), a KIND_CONCURRENCY entry
naming no registered kind (W005), what differs on MySQL/MariaDB (W010), and a
MySQL/MariaDB isolation level above READ COMMITTED (W011).

Each check is a small function of values (a settings dict, the kinds) beside the
registered check that feeds it, so that a test can hand it the case it reports.
"""

from __future__ import annotations

import inspect
import sys
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.db.utils import load_backend

from django_jobqueue import conf
from django_jobqueue.errors import ConfigurationError, JobQueueError
from django_jobqueue.store.pooling import pooled_reason
from django_jobqueue.task.periodic import schedules
from django_jobqueue.task.registry import TaskDef, registry


def _settings() -> conf.Settings | None:
    """The validated settings, or None when they are invalid (E001 reports that)."""
    try:
        return conf.validate(getattr(settings, "JOBQUEUE", None))
    except ConfigurationError:
        return None


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
    current = _settings()
    if current is None:
        return []
    return sqlite_warnings(current.database, settings.DATABASES[current.database])


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


# --- E003: the jobs database can run the claim ---------------------------------------------

#: The databases the claim is written for, and the oldest version of each it runs on:
#: PostgreSQL 12 for MATERIALIZED CTEs (SKIP LOCKED came in 9.5), SQLite 3.35 for
#: RETURNING and MATERIALIZED (SQLite serialises writers, so it needs no SKIP LOCKED),
#: MySQL 8.0.1 for SKIP LOCKED (MariaDB, the same vendor to Django: 10.6).
MINIMUM_VERSIONS: dict[str, tuple[int, ...]] = {
    "postgresql": (12,),
    "sqlite": (3, 35),
    "mysql": (8, 0, 1),
}
MARIADB_MINIMUM = (10, 6)


def vendor_of(database: Mapping[str, Any]) -> str | None:
    """The vendor of a ``DATABASES`` entry's backend, read from its ENGINE without
    connecting; None when the backend cannot be imported (Django reports that)."""
    try:
        backend = load_backend(str(database.get("ENGINE", "")))
    except ImproperlyConfigured:
        return None
    vendor: str = backend.DatabaseWrapper.vendor
    return vendor


def claim_support_errors(
    alias: str,
    vendor: str,
    *,
    engine: str = "",
    version: tuple[int, ...] | None = None,
    mariadb: bool = False,
) -> list[CheckMessage]:
    """E003 when the jobs database is of a kind, or a version, the claim does not run on
    (``mariadb``: the mysql vendor is MariaDB, whose versions count differently)."""
    supported = ", ".join(
        f"{name} {'.'.join(map(str, least))}+" for name, least in MINIMUM_VERSIONS.items()
    )
    supported += f" (MariaDB {'.'.join(map(str, MARIADB_MINIMUM))}+)"
    least = MARIADB_MINIMUM if mariadb else MINIMUM_VERSIONS.get(vendor)
    if mariadb:
        vendor = "MariaDB"
    if least is None:
        return [
            Error(
                f"The jobs database {alias!r} ({engine or vendor}) is not one the job queue "
                f"can claim jobs on; it runs on {supported}.",
                hint="Point JOBQUEUE['DATABASE'] at a PostgreSQL (or, for development, "
                "SQLite) alias in DATABASES.",
                id="django_jobqueue.E003",
            )
        ]
    if version is not None and tuple(version) < least:
        found = ".".join(map(str, version))
        wanted = ".".join(map(str, least))
        return [
            Error(
                f"The jobs database {alias!r} is {vendor} {found}: the claim "
                f"({_CLAIM_NEEDS.get(vendor, _CLAIM_NEEDS['postgresql'])}) needs "
                f"{vendor} {wanted} or newer.",
                hint=f"Upgrade {vendor} to {wanted} or newer, or point JOBQUEUE['DATABASE'] "
                "at a database that is.",
                id="django_jobqueue.E003",
            )
        ]
    return []


_CLAIM_NEEDS = {
    "postgresql": "UPDATE ... RETURNING over MATERIALIZED, SKIP LOCKED subqueries",
    "sqlite": "UPDATE ... RETURNING over MATERIALIZED subqueries",
    "mysql": "SELECT ... FOR UPDATE SKIP LOCKED",
    "MariaDB": "SELECT ... FOR UPDATE SKIP LOCKED",
}


@register()
def check_claim_support(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """The vendor always; the version too when checks may query the database
    (``check --database ALIAS``, and ``migrate``)."""
    current = _settings()
    if current is None:
        return []
    alias = current.database
    database = settings.DATABASES[alias]
    engine = str(database.get("ENGINE", ""))
    vendor = vendor_of(database)
    if vendor is None:
        return []  # an ENGINE that does not import: Django's own error when it connects
    errors = claim_support_errors(alias, vendor, engine=engine)
    if errors or alias not in (databases or ()):
        return errors
    connection = connections[alias]
    version = tuple(connection.get_database_version())
    mariadb = vendor == "mysql" and bool(getattr(connection, "mysql_is_mariadb", False))
    return claim_support_errors(alias, vendor, engine=engine, version=version, mariadb=mariadb)


# --- W002: SQLite runs one job at a time ---------------------------------------------------


def sqlite_concurrency_warnings(
    alias: str, database: Mapping[str, Any], concurrency: int
) -> list[CheckMessage]:
    """W002: SQLite has one writer at a time; jobs in parallel queue on its lock."""
    if not str(database.get("ENGINE", "")).endswith("sqlite3") or concurrency <= 1:
        return []
    return [
        Warning(
            f"The jobs database {alias!r} is SQLite and workers run {concurrency} jobs at "
            "once: SQLite lets one connection write at a time, so jobs that write wait on "
            "each other and, past the database timeout, fail with 'database is locked'.",
            hint="Set JOBQUEUE['CONCURRENCY'] = 1 (or run runworker --concurrency 1), or "
            "use PostgreSQL for parallel jobs. The default concurrency follows the CPU count.",
            id="django_jobqueue.W002",
        )
    ]


@register()
def check_sqlite_concurrency(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    current = _settings()
    if current is None:
        return []
    database = settings.DATABASES[current.database]
    return sqlite_concurrency_warnings(current.database, database, current.concurrency)


# --- W003: LISTEN through a transaction pooler ---------------------------------------------


def listen_warnings(
    alias: str,
    databases: Mapping[str, Mapping[str, Any]],
    listen_alias: str | None,
) -> list[CheckMessage]:
    """W003 when the worker's LISTEN would go through a transaction pooler: the jobs
    database looks pooled and ``listen_alias`` (LISTEN_DATABASE) is not set, or the
    alias it names looks pooled too. Such a LISTEN is lost whenever the pooler lends
    the session to another client, and workers fall back to their poll interval."""
    reason = pooled_reason(databases[alias])
    if reason is None and listen_alias is None:
        return []
    if listen_alias is None:
        return [
            Warning(
                f"The jobs database {alias!r} looks like it goes through a transaction "
                f"pooler ({reason}) and JOBQUEUE['LISTEN_DATABASE'] is not set: workers "
                "would LISTEN through the pooler, miss wake-ups, and start new jobs only "
                "at their poll interval.",
                hint="Add a DATABASES alias that connects to the same database directly "
                "(not through the pooler) and name it in JOBQUEUE['LISTEN_DATABASE']. "
                "If this alias is direct after all, set LISTEN_DATABASE to it.",
                id="django_jobqueue.W003",
            )
        ]
    listen = databases[listen_alias]
    if "postgresql" in str(databases[alias].get("ENGINE", "")) and "postgresql" not in str(
        listen.get("ENGINE", "")
    ):
        return [
            Warning(
                f"JOBQUEUE['LISTEN_DATABASE'] names {listen_alias!r}, which is not "
                "PostgreSQL: workers cannot LISTEN on it and start new jobs only at their "
                "poll interval.",
                hint=f"Point LISTEN_DATABASE at an alias that reaches the database of "
                f"{alias!r} directly.",
                id="django_jobqueue.W003",
            )
        ]
    listen_reason = pooled_reason(listen)
    if listen_reason is None:
        return []
    return [
        Warning(
            f"JOBQUEUE['LISTEN_DATABASE'] names {listen_alias!r}, which looks like it goes "
            f"through a transaction pooler too ({listen_reason}): workers would miss "
            "wake-ups and start new jobs only at their poll interval.",
            hint=f"Point DATABASES[{listen_alias!r}] at PostgreSQL itself, not the pooler.",
            id="django_jobqueue.W003",
        )
    ]


@register()
def check_listen_database(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    current = _settings()
    if current is None:
        return []
    listen = (getattr(settings, "JOBQUEUE", None) or {}).get("LISTEN_DATABASE")
    return listen_warnings(current.database, settings.DATABASES, listen)


# --- E004 / W004: task kinds that collide --------------------------------------------------


def _folded(kind: str) -> str:
    return unicodedata.normalize("NFKC", kind).casefold().strip()


def kind_collision_errors(definitions: Iterable[TaskDef]) -> list[CheckMessage]:
    """E004: kinds that differ only in case, Unicode form or surrounding spaces.

    The registry refuses one kind defined twice, but these are two kinds: they look
    alike to operators (the admin's filters, ``runworker --kind``, KIND_CONCURRENCY
    keys) and are one value under MySQL's and MariaDB's case-insensitive collations.
    """
    groups: dict[str, list[TaskDef]] = defaultdict(list)
    for defn in definitions:
        groups[_folded(defn.kind)].append(defn)
    errors: list[CheckMessage] = []
    for group in groups.values():
        if len({d.kind for d in group}) < 2:
            continue
        named = "; ".join(f"{d.kind!r} ({d.origin})" for d in sorted(group, key=lambda d: d.kind))
        errors.append(
            Error(
                f"Task kinds that differ only in case or spelling of the same letters "
                f"collide: {named}.",
                hint="Give one of them a distinct kind=... (kinds are stable names; keep "
                "the one that jobs already in the database carry).",
                id="django_jobqueue.E004",
            )
        )
    return errors


def _source_of(defn: TaskDef) -> tuple[str, str, str] | None:
    """The file and qualified name that define a task's code, whatever module name it
    was imported under; and that module name."""
    target: Any = getattr(defn, "func", None) or getattr(defn, "cls", None)
    if target is None:
        target = getattr(getattr(defn, "task", None), "func", None)
    if target is None:
        return None
    target = inspect.unwrap(target)
    name = str(getattr(target, "__module__", ""))
    path = getattr(sys.modules.get(name), "__file__", None)
    qualname = getattr(target, "__qualname__", None)
    if path is None or qualname is None:
        return None
    return path, qualname, name


def double_import_warnings(definitions: Iterable[TaskDef]) -> list[CheckMessage]:
    """W004: one task's code registered under two kinds because its module was imported
    under two names (``shop.tasks`` and ``tasks``, say), each giving a default kind of
    its own. Jobs enqueued under one kind wait forever for a worker that imported the
    module only under the other."""
    by_source: dict[tuple[str, str], list[TaskDef]] = defaultdict(list)
    modules: dict[tuple[str, str], set[str]] = defaultdict(set)
    for defn in definitions:
        source = _source_of(defn)
        if source is not None:
            by_source[source[:2]].append(defn)
            modules[source[:2]].add(source[2])
    warnings: list[CheckMessage] = []
    for (path, qualname), group in by_source.items():
        if len(modules[path, qualname]) < 2:
            continue  # one module's code under two kinds is deliberate (a kind renamed)
        kinds = ", ".join(sorted(repr(d.kind) for d in group))
        warnings.append(
            Warning(
                f"{qualname} in {path} is registered under several kinds ({kinds}): its "
                "module was imported under more than one name.",
                hint="Import the module under one name only (check sys.path and imports "
                "like 'from tasks import ...'), or give the task an explicit kind=...",
                id="django_jobqueue.W004",
            )
        )
    return warnings


@register()
def check_task_kinds(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    definitions = list(registry)
    return [*kind_collision_errors(definitions), *double_import_warnings(definitions)]


# --- W005: settings naming unknown kinds ---------------------------------------------------


def unknown_kind_warnings(
    setting: str, kinds: Iterable[str], *, id: str, known: Iterable[str] | None = None
) -> list[CheckMessage]:
    """A warning for each of ``kinds`` that no registered task has, for the setting named
    ``setting`` (``"KIND_CONCURRENCY"``, say) under the check id ``id``; ``known``
    defaults to the registry's kinds. For any setting keyed by kind to reuse."""
    registered = set(registry.kinds() if known is None else known)
    by_folded = {_folded(k): k for k in registered}
    warnings: list[CheckMessage] = []
    for kind in kinds:
        if kind in registered:
            continue
        near = by_folded.get(_folded(kind))
        hint = (
            f"Did you mean {near!r}?"
            if near is not None
            else "Check the spelling against the registered kinds (manage.py jobqueue "
            "stats lists the kinds in the database); an app whose tasks.py defines it "
            "may be missing from INSTALLED_APPS."
        )
        warnings.append(
            Warning(
                f"JOBQUEUE[{setting!r}] names kind {kind!r}, which no registered task has: "
                "the entry has no effect.",
                hint=hint,
                id=id,
            )
        )
    return warnings


@register()
def check_kind_concurrency(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    current = _settings()
    if current is None:
        return []
    return unknown_kind_warnings(
        "KIND_CONCURRENCY", current.kind_concurrency, id="django_jobqueue.W005"
    )


@register()
def check_limits(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """JOBQUEUE["LIMITS"] keyed by a kind no task has: W005, as for KIND_CONCURRENCY."""
    current = _settings()
    if current is None:
        return []
    return unknown_kind_warnings("LIMITS", current.limits, id="django_jobqueue.W005")


@register()
def check_periodic_schedules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A PERIODIC schedule naming a kind no task has, or arguments its task does not take
    (or a Task class's ``cron`` on a class whose fields need values), fails ``check``
    and ``runworker`` at start."""
    if _settings() is None:
        return []  # reported by check_settings
    try:
        schedules()
    except JobQueueError as exc:
        return [
            Error(
                str(exc),
                id="django_jobqueue.E005",
                hint="See docs/howto/periodic-jobs.md: each schedule names a registered task "
                "kind and arguments that fit it.",
            )
        ]
    return []


# --- W010, W011: MySQL/MariaDB ---------------------------------------------------------------


def mysql_warnings(alias: str, database: Mapping[str, Any]) -> list[CheckMessage]:
    """W010 on MySQL/MariaDB, saying what differs there (docs/explanation/databases.md has the
    table); W011 too when the isolation level is above READ COMMITTED."""
    if not str(database.get("ENGINE", "")).endswith("mysql"):
        return []
    isolation = str((database.get("OPTIONS") or {}).get("isolation_level") or "read committed")
    messages: list[CheckMessage] = []
    if isolation.lower() not in ("read committed", "read uncommitted"):
        messages.append(
            Warning(
                f"The jobs database {alias!r} is MySQL/MariaDB at isolation level "
                f"{isolation!r}: an enqueue whose idempotency key another transaction has "
                "just taken cannot see that job from its older snapshot (it fails instead "
                "of reusing it), and locking reads take gap locks that slow concurrent "
                "claims.",
                hint=f"Remove DATABASES[{alias!r}]['OPTIONS']['isolation_level'] (Django's "
                "default for MySQL is 'read committed') or set it to 'read committed'.",
                id="django_jobqueue.W011",
            )
        )
    return [
        *messages,
        Warning(
            f"The jobs database {alias!r} is MySQL/MariaDB: jobs are claimed with SKIP "
            "LOCKED and settled under their guard as on PostgreSQL, but idle workers poll "
            "(no LISTEN/NOTIFY: a new job waits up to POLL_INTERVAL), the indexes are whole "
            "rather than partial (the idempotency key's uniqueness is a generated column's "
            "unique index), a claim or settlement takes a few statements instead of one, "
            "and JSON is stored as checked text.",
            hint="See docs/explanation/databases.md for the feature-by-database table; add "
            "'django_jobqueue.W010' to SILENCED_SYSTEM_CHECKS once you have read it.",
            id="django_jobqueue.W010",
        ),
    ]


@register()
def check_mysql(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    current = _settings()
    if current is None:
        return []
    return mysql_warnings(current.database, settings.DATABASES[current.database])
