"""The DATABASES setting: the Django aliases that hold the queue's tables when there is
more than one, and how a job picks its database (``routing`` applies it). Apart from
``conf`` because it is a small language of its own, as PERIODIC is.

A value, checked as far as settings can be::

    "DATABASES": {
        "ALIASES": ["jobs_a", "jobs_b"],  # required: aliases of settings.DATABASES
        "ROUTE": "key",                    # "key", "queue", or a dotted path to a callable
        "QUEUES": {"mail": "jobs_b"},      # a queue pinned to one database, before ROUTE
        "HOME": "jobs_a",                  # the periodic schedules' database (first alias)
        "READ": {"jobs_a": "jobs_a_ro"},   # a replica the operators' pages read from
    }
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.utils.module_loading import import_string

from django_jobqueue.errors import ConfigurationError

KEY = "DATABASES"
DATABASES_KEYS = ("ALIASES", "ROUTE", "QUEUES", "HOME", "READ")
# The built-in routes: by the job's key (keyless jobs by their queue), or by its queue.
ROUTES = ("key", "queue")


@dataclass(frozen=True)
class QueueDatabases:
    """The checked DATABASES setting."""

    aliases: tuple[str, ...]
    home: str
    route: str = "key"
    queues: dict[str, str] = field(default_factory=dict)
    read: dict[str, str] = field(default_factory=dict)
    #: The ROUTE callable (``route`` is then its dotted path); None for a built-in one.
    router: Callable[..., Any] | None = None


def alias(database: Any, key: str = "DATABASE") -> str:
    """DATABASE (or LISTEN_DATABASE, ``key``): an alias of ``settings.DATABASES``."""
    if not isinstance(database, str) or database not in django_settings.DATABASES:
        raise ConfigurationError(
            f"{key} must name an alias in settings.DATABASES, got {database!r}",
            key=key,
        )
    return database


def parse_databases(raw: Any, *, default: str) -> QueueDatabases | None:
    """DATABASES checked against ``settings.DATABASES``: ``parse``."""
    return parse(raw, default=default, known=django_settings.DATABASES)


def parse(raw: Any, *, default: str, known: Any) -> QueueDatabases | None:
    """DATABASES checked against ``known`` (``settings.DATABASES``); None when unset.
    ``default`` (the DATABASE setting) is the home if it is one of the aliases."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _error(f'must be a dict such as {{"ALIASES": ["jobs_a", "jobs_b"]}}, got {raw!r}')
    unknown = sorted(set(raw) - set(DATABASES_KEYS))
    if unknown:
        raise _error(
            f"has unknown key(s) {', '.join(map(repr, unknown))}; known: "
            f"{', '.join(DATABASES_KEYS)}"
        )
    aliases = _aliases(raw.get("ALIASES"), known)
    home = raw.get("HOME", default if default in aliases else aliases[0])
    if home not in aliases:
        raise _error(f"HOME must be one of ALIASES {list(aliases)}, got {home!r}")
    route, router = _route(raw.get("ROUTE", "key"))
    return QueueDatabases(
        aliases=aliases,
        home=home,
        route=route,
        router=router,
        queues=_mapping("QUEUES", raw.get("QUEUES", {}), keys=None, values=aliases),
        read=_mapping("READ", raw.get("READ", {}), keys=aliases, values=tuple(known)),
    )


def _error(message: str) -> ConfigurationError:
    return ConfigurationError(f"{KEY} {message}", key=KEY)


def _aliases(raw: Any, known: Any) -> tuple[str, ...]:
    if isinstance(raw, str) or not isinstance(raw, list | tuple) or not raw:
        raise _error(f"ALIASES must be a non-empty list of database aliases, got {raw!r}")
    for alias in raw:
        if not isinstance(alias, str) or alias not in known:
            raise _error(f"ALIASES: {alias!r} is not an alias in settings.DATABASES")
    if len(set(raw)) != len(raw):
        raise _error(f"ALIASES names an alias twice: {list(raw)}")
    return tuple(raw)


def _route(raw: Any) -> tuple[str, Callable[..., Any] | None]:
    if raw in ROUTES:
        return str(raw), None
    if not isinstance(raw, str) or "." not in raw:
        raise _error(f'ROUTE must be "key", "queue" or a dotted path to a callable, got {raw!r}')
    try:
        router = import_string(raw)
    except ImportError as exc:
        raise _error(f"ROUTE {raw!r} cannot be imported: {exc}") from exc
    if not callable(router):
        raise _error(f"ROUTE {raw!r} is not callable")
    return raw, router


def _mapping(
    name: str, raw: Any, *, keys: tuple[str, ...] | None, values: tuple[str, ...]
) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise _error(f"{name} must be a dict, got {raw!r}")
    for key, value in raw.items():
        if not isinstance(key, str) or not key or (keys is not None and key not in keys):
            allowed = "a queue name" if keys is None else f"one of ALIASES {list(keys)}"
            raise _error(f"{name}: each key must be {allowed}, got {key!r}")
        if value not in values:
            raise _error(f"{name}[{key!r}] must be one of {list(values)}, got {value!r}")
    return dict(raw)
