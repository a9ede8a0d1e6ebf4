"""Every run starts on a clean connection: what a run leaves on its thread's connections
never reaches the next run (a worker's slot thread's, or ``testing.run_jobs``'s caller's).

After each run the pipeline looks at each of its thread's connections. One left inside an
atomic block or with autocommit not as configured holds a transaction the run never
committed: it is rolled back and closed, and the run is not completed (its writes are
gone), so it settles as a failure naming the alias. One whose session settings the run
changed (``SET``, ``RESET``, ``set_config()``, ``PRAGMA``), or that saw an error and is
no longer usable, is closed. The next run connects afresh. A healthy connection stays
open whatever ``CONN_MAX_AGE`` says (``close_if_unusable_or_obsolete`` would reconnect
for every job at its default, 0).

The looking costs attribute reads: the thread's connection wrappers are held from its
start, never looked up. Session changes are noticed by an execute wrapper that reads the
head of each statement a run sends through Django, rather than by a query of
``pg_settings`` after each run: the wrapper costs the runs that query about a
microsecond per statement and runs that do not nothing, where the query would add a
round trip to every run that touched the database, and would cover PostgreSQL only.
What it cannot see is SQL sent on the driver's own connection, past Django's cursor.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from django_jobqueue.run.executor import RunResult

logger = logging.getLogger("django_jobqueue")

# A statement that changes the session: SET (SET LOCAL too, which is harmless but cheap
# to treat alike), RESET, SQLite's PRAGMA, after any comments. Anchored at the start, so
# an UPDATE's SET never matches and most statements fail at their first letters.
_SETTER = re.compile(
    r"\s*(?:(?:/\*.*?\*/|--[^\n]*(?:\n|$))\s*)*(?:SET|RESET|PRAGMA)\b", re.IGNORECASE | re.DOTALL
)


def changes_session(sql: object) -> bool:
    """Whether a statement may change session state, read from its text cheaply."""
    if not isinstance(sql, str):
        return False
    if _SETTER.match(sql) or "set_config" in sql or "SET_CONFIG" in sql:
        return True
    # Several statements in one (raw SQL only): look at the head of each.
    return ";" in sql and any(_SETTER.match(part) for part in sql.split(";"))


class SessionWatch:
    """An execute wrapper on one slot connection: notes a statement that changes the
    session. Reset when the connection (re)connects, so the backends' own SETs at
    connection time (MySQL's isolation level) do not count."""

    __slots__ = ("changed",)

    def __init__(self) -> None:
        self.changed = False

    def __call__(
        self,
        execute: Callable[..., Any],
        sql: Any,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        if not self.changed and changes_session(sql):
            self.changed = True
        return execute(sql, params, many, context)


def _connected(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    for wrapper in connection.execute_wrappers:
        if isinstance(wrapper, SessionWatch):
            wrapper.changed = False


class ThreadConnections:
    """One thread's connections, watched from the guard's start; ``after_run`` leaves
    them as they were for the next run. Made on the thread it guards.

    A worker's slot thread starts with nothing open. ``testing.run_jobs`` may start
    inside its caller's transaction (a test's): that transaction is the caller's, so
    only what a run opened above it is rolled back, and nothing is closed under it.
    ``close`` takes the watch off again, for a guard that ends before its thread does.
    """

    def __init__(self) -> None:
        connection_created.connect(_connected, dispatch_uid="django_jobqueue.run.connguard")
        # Each connection, its watch and how many atomic blocks the caller holds open.
        self._held: list[tuple[BaseDatabaseWrapper, SessionWatch, int]] = []
        for alias in connections:
            conn = connections[alias]
            watch = SessionWatch()
            conn.execute_wrappers.append(watch)
            self._held.append((conn, watch, len(conn.atomic_blocks)))

    def __enter__(self) -> ThreadConnections:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn, watch, _ in self._held:
            conn.execute_wrappers.remove(watch)
        self._held = []

    def before_run(self) -> None:
        """Forget the statements sent between runs (a caller's claims and settlements on
        this thread): only the run's own may close a connection."""
        for _, watch, _ in self._held:
            watch.changed = False

    def after_run(self, result: RunResult) -> RunResult:
        """The run's result, failed if the run left a transaction open (rolled back now);
        every connection the run left unfit for the next one closed."""
        left: list[str] = []
        closed = False
        for conn, watch, depth in self._held:
            if conn.connection is None:
                continue  # never connected, or closed: the next run connects afresh
            open_ = left_open(conn, depth)
            if open_:
                left.append(f"left a transaction open on {conn.alias!r} ({open_})")
                discard(conn, depth)
                closed = closed or not depth
            elif depth:
                pass  # inside the caller's transaction: not ours to close
            elif watch.changed:
                _close(conn)
            elif conn.errors_occurred:
                _close_if_unusable(conn)
            watch.changed = False
        if not left:
            return result
        job = result.job
        logger.warning(
            "job=%s kind=%s run=%d %s: rolled back%s",
            job.id,
            job.kind,
            job.run_count,
            "; ".join(left),
            ", connection closed" if closed else "",
        )
        return not_completed(result, "; ".join(left))


def left_open(conn: BaseDatabaseWrapper, depth: int = 0) -> str:
    """What a run left open on a connection that held ``depth`` atomic blocks when it
    started ('' if nothing): an atomic block never exited, or autocommit not as
    configured (which only a connection outside any atomic block can change)."""
    if depth:
        return (
            "an atomic block was entered and never exited"
            if len(conn.atomic_blocks) > depth
            else ""
        )
    if conn.in_atomic_block:
        return "an atomic block was entered and never exited"
    if conn.autocommit != conn.settings_dict["AUTOCOMMIT"]:
        return "autocommit off" if not conn.autocommit else "autocommit on"
    return ""


class _Leaked(Exception):
    """Passed to the atomic blocks a run never exited, so that they roll back."""


def discard(conn: BaseDatabaseWrapper, depth: int = 0) -> None:
    """Roll back what a run left open on ``conn`` and close it. The atomic blocks it never
    exited are exited as if by an exception (each rolls back as Django would); whatever
    goes wrong on the way, the connection ends closed and Django's state reset. Inside
    the caller's ``depth`` blocks, only the run's own are exited, and it stays open."""
    if depth:
        try:
            for block in reversed(conn.atomic_blocks[depth:]):
                block.__exit__(_Leaked, _Leaked(), None)
        except Exception as exc:  # the caller's transaction can then only roll back
            logger.warning("rolling back a leaked block on %r failed: %s", conn.alias, exc)
            del conn.atomic_blocks[depth:]
            conn.needs_rollback = True
        return
    try:
        for block in reversed(list(conn.atomic_blocks)):
            block.__exit__(_Leaked, _Leaked(), None)
        if conn.connection is not None and not conn.get_autocommit():
            conn.rollback()
    except Exception as exc:  # a dead connection: closing it rolls back on the server
        logger.warning("rolling back a leaked transaction on %r failed: %s", conn.alias, exc)
    conn.in_atomic_block = False
    conn.atomic_blocks = []
    conn.savepoint_ids = []
    conn.needs_rollback = False
    conn.closed_in_transaction = False
    conn.commit_on_exit = True
    _close(conn)


def _close(conn: BaseDatabaseWrapper) -> None:
    """Close a connection; one already closed under Django (by the server, or by the
    task on the driver's own connection) may raise doing so, and is closed all the same."""
    try:
        conn.close()
    except Exception as exc:
        logger.debug("closing %r after a run: %s", conn.alias, exc)
    conn.connection = None


def close_broken() -> None:
    """Close this thread's connections that saw an error and no longer answer (outside
    any atomic block): the threads an async task's ORM calls run on are shared by many
    runs at once, so only a dead connection (a restarted server, a killed session) is
    theirs to drop, and the next call reconnects instead of failing on it forever."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and conn.errors_occurred and not conn.in_atomic_block:
            _close_if_unusable(conn)


def _close_if_unusable(conn: BaseDatabaseWrapper) -> None:
    try:
        usable = conn.is_usable()
    except Exception:
        usable = False
    if usable:
        conn.errors_occurred = False
    else:
        _close(conn)


def not_completed(result: RunResult, leak: str) -> RunResult:
    """A run whose open transaction was rolled back: not completed, whatever it returned
    (its writes are gone). A failure, unless it already ended dead; a lost claim stays
    lost (nothing of it may be written)."""
    if result.lost:
        return result
    end = result.end if result.end in ("failed", "permanent", "mismatch") else "failed"
    note = f"the run {leak}: its uncommitted writes were rolled back"
    return dataclasses.replace(
        result,
        end=end,
        value=None,
        settled=False,
        note="\n".join(filter(None, [note, result.note])),
    )
