"""The worker's guard around its database calls: a lost connection costs one call,
never the worker.

On a connection error (or a transient one: SQLite's "database is locked", a
serialisation failure, a deadlock; the database's dialect tells them apart) the guard
closes the connection, backs off (0.1 s doubling to 5 s) and returns None; the worker
keeps what it could not write and tries again. Any other database error is raised: it
is not the connection's.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, connections

from django_jobqueue import routing
from django_jobqueue.store.dialects import for_alias

logger = logging.getLogger("django_jobqueue")

T = TypeVar("T")


class DbGuard:
    """Runs store calls for one worker; ``stopping`` cuts a back-off short."""

    def __init__(self, alias: str, stopping: threading.Event) -> None:
        self.alias = alias
        self.stopping = stopping
        self.failures = 0  # consecutive connection errors
        self.retry_at = 0.0  # monotonic time after which to try again

    def __call__(self, call: Callable[[], T]) -> T | None:
        """Run a store call; on a connection error close, back off and return None."""
        try:
            result = call()
        except (DatabaseError, InterfaceError) as exc:
            # InterfaceError ("connection already closed") is not a DatabaseError.
            if not is_connection_error(exc, alias=self.alias):
                raise
            self.failed(str(exc))
            return None
        if self.failures:
            logger.info("database connection restored")
            self.failures = 0
        return result

    def failed(self, why: str) -> None:
        """Count a connection error, close the connection and back off: for one a call
        met, and for one the idle loop met reading its socket (so both log the same two
        lines, the error and, at the next call that works, the connection restored)."""
        self.failures += 1
        wait = self.backoff()
        logger.warning("database error (%s); reconnecting in %.1fs", why.strip()[:200], wait)
        with contextlib.suppress(Exception):  # the connection is already broken
            connections[self.alias].close()
        self.retry_at = time.monotonic() + wait
        self.stopping.wait(wait)

    def backoff(self) -> float:
        return float(min(0.1 * 2 ** max(self.failures - 1, 0), 5.0))

    @property
    def waiting(self) -> bool:
        """Whether the last call failed and its back-off has not run out yet."""
        return bool(self.failures) and time.monotonic() < self.retry_at


def is_connection_error(exc: BaseException, *, alias: str | None = None) -> bool:
    """Whether ``exc`` is the connection's (or transient), as the dialect of database
    ``alias`` (the jobs database by default) classifies its errors."""
    return for_alias(alias or routing.current()).is_connection_error(exc)
