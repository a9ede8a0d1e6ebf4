"""Which queue database a statement goes to: the one routing decision (``route``) and
the database the current code works on (``current``), which every store statement
reads through ``store.sql.alias()``.

With one queue database (no DATABASES setting) ``current()`` is DATABASE and nothing
here costs a statement. With several, a job's database is chosen once, at enqueue
(``route``), and everything that must be exactly once together with it (its workflow
and joins, its key's limits, its events' waiters) lives there too. The choice is made
current for a block (``using``); a worker process serving one database makes it its
own for every thread it starts (``serve``), since a new thread starts with an empty
context.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django_jobqueue import conf
from django_jobqueue.errors import ConfigurationError

_chosen: ContextVar[str | None] = ContextVar("django_jobqueue_database", default=None)
_served: list[str] = []  # the database this process serves (runworker --database)


def current() -> str:
    """The queue database statements go to now: the block's (``using``), else the one
    this process serves, else DATABASE (with several: their HOME)."""
    chosen = _chosen.get()
    if chosen is not None:
        return chosen
    return _served[0] if _served else conf.get().database


@contextmanager
def using(alias: str) -> Iterator[str]:
    """Make ``alias`` the current queue database for the block (this thread, and the
    tasks and threads that copy its context)."""
    token = _chosen.set(alias)
    try:
        yield alias
    finally:
        _chosen.reset(token)


def serve(alias: str | None) -> None:
    """Make ``alias`` this process's queue database (None: back to DATABASE): what a
    worker process serving one database sets before it starts its threads."""
    _served.clear()
    if alias is not None:
        _served.append(check(alias))


def aliases() -> tuple[str, ...]:
    """Every queue database, HOME first when DATABASES names several."""
    settings = conf.get()
    if settings.databases is None:
        return (settings.database,)
    home = settings.databases.home
    return (home, *(a for a in settings.databases.aliases if a != home))


def several() -> bool:
    return conf.get().databases is not None


def is_home() -> bool:
    """Whether the current database is HOME (DATABASE): the periodic schedules' own."""
    return current() == conf.get().database


def each() -> Iterator[str]:
    """Every queue database in turn, each current while the loop body runs."""
    for alias in aliases():
        with using(alias):
            yield alias


def check(alias: str) -> str:
    """A database named by an operator (``--database``, the admin's selector): one of
    the queue databases, else an error naming them."""
    known = aliases()
    if alias not in known:
        raise ConfigurationError(
            f"{alias!r} is not a queue database; the queue databases are "
            f"{', '.join(known)} (JOBQUEUE DATABASES, or DATABASE)",
            key="DATABASES",
        )
    return alias


def stable_index(text: str, count: int) -> int:
    """The same index for the same text in every process and every release (crc32, not
    ``hash()``, which is salted per process)."""
    return zlib.crc32(text.encode("utf-8")) % count


def route(*, kind: str, queue: str, key: str | None) -> str:
    """The database a new job goes to: its queue's if QUEUES pins it; else by ROUTE: a
    callable's answer, the key's database ("key"; a keyless job goes by its queue), or
    the queue's ("queue"). With one database, that one."""
    settings = conf.get().databases
    if settings is None:
        return conf.get().database
    pinned = settings.queues.get(queue)
    if pinned is not None:
        return pinned
    if settings.router is not None:
        return _called(settings.route, settings.router(kind=kind, queue=queue, key=key))
    text = key if settings.route == "key" and key else queue
    return settings.aliases[stable_index(text, len(settings.aliases))]


def target(*, kind: str, queue: str, key: str | None) -> str:
    """Where a new job goes: the database a ``using`` block chose (a workflow's steps
    go to its root's, an action to its job's), else its route."""
    chosen = _chosen.get()
    return chosen if chosen is not None else route(kind=kind, queue=queue, key=key)


def for_key(key: str) -> str:
    """The database a key's jobs go to under ROUTE "key" (an event's key is routed so)."""
    settings = conf.get().databases
    if settings is None:
        return conf.get().database
    return settings.aliases[stable_index(key, len(settings.aliases))]


def _called(path: str, alias: object) -> str:
    known = aliases()
    if not isinstance(alias, str) or alias not in known:
        raise ConfigurationError(
            f"DATABASES ROUTE {path} returned {alias!r}, not one of the queue databases "
            f"{', '.join(known)}",
            key="DATABASES",
        )
    return alias


def read_alias() -> str:
    """The alias the operators' pages read the current database through: its READ
    replica if DATABASES names one, else the database itself. Never for anything that
    claims, settles, decides or confirms an action."""
    settings = conf.get().databases
    alias = current()
    if settings is None:
        return alias
    return settings.read.get(alias, alias)


def listen_alias() -> str:
    """The alias LISTEN goes through: LISTEN_DATABASE for DATABASE itself, else the
    current queue database (a notification is sent on the database that commits)."""
    settings = conf.get()
    alias = current()
    return settings.listen_database if alias == settings.database else alias
