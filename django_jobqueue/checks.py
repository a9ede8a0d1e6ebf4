"""System checks (``manage.py check``, and at ``runworker``'s start).

Errors: a bad JOBQUEUE setting (E001), the admin without rangefilter (E002), a jobs
database that cannot run the claim (E003: of another kind, or too old, such as a
MariaDB before 10.6 or a MySQL before 8.0.1 without SKIP LOCKED), task kinds that
differ only in case (E004), a periodic schedule that does not fit its task (E005).
Warnings: SQLite without IMMEDIATE transactions (W001) or with more than one job at a
time (W002), wake-ups that would LISTEN through a transaction pooler (W003), one task
registered under two kinds by a double import (W004), a KIND_CONCURRENCY entry
naming no registered kind (W005), a task no worker imports (W006), what differs on
MySQL/MariaDB (W010), and a MySQL/MariaDB isolation level above READ COMMITTED (W011).

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

from django.apps import apps as django_apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured

from django_jobqueue import conf
from django_jobqueue.errors import ConfigurationError, JobQueueError
from django_jobqueue.store import dialects
from django_jobqueue.task.periodic import schedules
from django_jobqueue.task.registry import KEY_LIMITS, TaskDef, registry


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
        return [
            Error(
                str(exc),
                id="django_jobqueue.E001",
                hint="See the Settings page of the django-jobqueue documentation "
                "(reference/settings).",
            )
        ]
    return []


@register()
def check_database(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """What the jobs database's settings earn on its kind of database (W001, W002,
    W010, W011): the database's dialect says."""
    current = _settings()
    if current is None:
        return []
    aliases = current.databases.aliases if current.databases else (current.database,)
    return [
        message
        for alias in aliases  # each queue database
        for message in database_warnings(
            alias, settings.DATABASES[alias], concurrency=current.concurrency
        )
    ]


def database_warnings(
    alias: str, database: Mapping[str, Any], *, concurrency: int = 1
) -> list[CheckMessage]:
    """W001 (SQLite without IMMEDIATE transactions: a second writer fails with
    "database is locked" instead of waiting its turn), W002 (SQLite running jobs in
    parallel), W010 and W011 (MySQL/MariaDB): each database's dialect knows its own
    (docs/explanation/databases.md has what differs, database by database)."""
    try:
        dialect = dialects.for_settings(database)
    except ImproperlyConfigured:
        return []  # an ENGINE that does not import: Django's own error when it connects
    if dialect is None:
        return []  # E003 reports it
    return dialect.configuration_problems(alias, database, concurrency=concurrency)


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

#: The oldest version of each database the claim runs on, by Django's vendor name (the
#: dialects' own: PostgreSQL 12 for MATERIALIZED CTEs, SQLite 3.35 for RETURNING and
#: MATERIALIZED, MySQL 8.0.1 and MariaDB 10.6 for SKIP LOCKED).
MINIMUM_VERSIONS = dialects.MINIMUM_VERSIONS


def claim_support_errors(
    alias: str,
    dialect: type[dialects.Dialect] | None,
    *,
    engine: str = "",
    server: tuple[str, tuple[int, ...], tuple[int, ...]] | None = None,
) -> list[CheckMessage]:
    """E003 when the jobs database is of a kind the claim does not run on (``dialect``
    None), or its ``server`` (name, version, oldest the claim runs on: the dialect's
    ``server()``) is too old."""
    if dialect is None:
        return [
            Error(
                f"The jobs database {alias!r} ({engine}) is not one the job queue can claim "
                f"jobs on; it runs on {dialects.supported_servers()}.",
                hint="Point JOBQUEUE['DATABASE'] at a PostgreSQL (or, for development, "
                "SQLite) alias in DATABASES.",
                id="django_jobqueue.E003",
            )
        ]
    if server is None or tuple(server[1]) >= server[2]:
        return []
    name, version, least = server
    found = ".".join(map(str, version))
    wanted = ".".join(map(str, least))
    return [
        Error(
            f"The jobs database {alias!r} is {name} {found}: the claim "
            f"({dialect.claim_needs}) needs {name} {wanted} or newer.",
            hint=f"Upgrade {name} to {wanted} or newer, or point JOBQUEUE['DATABASE'] "
            "at a database that is.",
            id="django_jobqueue.E003",
        )
    ]


@register()
def check_claim_support(
    app_configs: Any = None, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """The kind of database always; the version too when checks may query the database
    (``check --database ALIAS``, and ``migrate``)."""
    current = _settings()
    if current is None:
        return []
    alias = current.database
    database = settings.DATABASES[alias]
    engine = str(database.get("ENGINE", ""))
    try:
        dialect = dialects.for_settings(database)
    except ImproperlyConfigured:
        return []  # an ENGINE that does not import: Django's own error when it connects
    if dialect is None or alias not in (databases or ()):
        return claim_support_errors(alias, dialect, engine=engine)
    server = dialects.for_alias(alias).server()
    return claim_support_errors(alias, dialect, engine=engine, server=server)


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
    reason = _pooled_reason(databases[alias])
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
    if _listens(databases[alias]) and not _listens(listen):
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
    listen_reason = _pooled_reason(listen)
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


def _dialect_of(database: Mapping[str, Any]) -> type[dialects.Dialect] | None:
    try:
        return dialects.for_settings(database)
    except ImproperlyConfigured:
        return None


def _pooled_reason(database: Mapping[str, Any]) -> str | None:
    dialect = _dialect_of(database)
    return None if dialect is None else dialect.pooled_reason(database)


def _listens(database: Mapping[str, Any]) -> bool:
    dialect = _dialect_of(database)
    return dialect is not None and dialect.listens()


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


def _in_tasks_module(module: str, apps: Iterable[str]) -> bool:
    return any(module == f"{app}.tasks" or module.startswith(f"{app}.tasks.") for app in apps)


def unimported_task_warnings(
    definitions: Iterable[TaskDef], *, discovered: frozenset[str], apps: Iterable[str]
) -> list[CheckMessage]:
    """W006: a task registered only after Django was set up, by a module that is no
    installed app's ``tasks`` module (``shop/jobs.py`` imported by a view, say). Workers
    import each app's tasks module, and what it imports, at start, so they never see
    it: its jobs enqueue and wait forever."""
    apps = list(apps)
    warnings: list[CheckMessage] = []
    for defn in definitions:
        source = _source_of(defn)
        if defn.kind in discovered or source is None or _in_tasks_module(source[2], apps):
            continue
        module = source[2]
        app = max((a for a in apps if module.startswith(f"{a}.")), key=len, default=None)
        where = f"{app}/tasks.py".replace(".", "/") if app else "an installed app's tasks.py"
        warnings.append(
            Warning(
                f"Task kind {defn.kind!r} is registered by {module}, which is not an "
                "installed app's tasks module nor imported by one: workers will not import "
                "it, so its jobs would be enqueued and never run.",
                hint=(
                    f"Define it at module level in {where}."
                    if "<locals>" in source[1]
                    else f"Move {source[1]} into {where}, or import it there "
                    f"(from {module} import {source[1]})."
                ),
                id="django_jobqueue.W006",
            )
        )
    return warnings


@register()
def check_task_kinds(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    definitions = list(registry)
    found = [*kind_collision_errors(definitions), *double_import_warnings(definitions)]
    if registry.discovered is not None:
        apps = [config.name for config in django_apps.get_app_configs()]
        found += unimported_task_warnings(definitions, discovered=registry.discovered, apps=apps)
    return found


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
                hint="Each schedule names a registered task kind and arguments that fit "
                "it: see the Periodic jobs page of the django-jobqueue documentation "
                "(howto/periodic-jobs).",
            )
        ]
    return []


@register()
def check_limits_across_databases(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W007: with several queue databases, a kind's global limits (``max_in_flight``,
    ``rate_limit``, in LIMITS or on its task) hold on each database apart, and its
    per-key limits too unless ROUTE keeps a key's jobs on one database ("key")."""
    current = _settings()
    if current is None or current.databases is None:
        return []
    count, by_key = len(current.databases.aliases), current.databases.route == "key"
    found: dict[str, list[str]] = defaultdict(list)
    for kind, entry in current.limits.items():
        found[kind] += [n for n, v in entry.items() if v is not None]
    for defn in registry:
        found[defn.kind] += [n for n in ("max_in_flight", "rate_limit") if getattr(defn, n)]
        if not by_key:
            found[defn.kind] += [n for n in KEY_LIMITS if getattr(defn, n, None)]
    return [
        Warning(
            f"{kind}: {', '.join(sorted(set(names)))} holds on each of the {count} queue "
            "databases apart (up to that many times the limit in all)",
            hint="Limits are per queue database: divide the limit, route the kind to one "
            'database (DATABASES QUEUES), or keep ROUTE "key" for per-key limits.',
            id="django_jobqueue.W007",
        )
        for kind, names in sorted(found.items())
        if names
    ]
