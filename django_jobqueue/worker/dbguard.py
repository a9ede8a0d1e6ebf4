"""The worker's guard around its database calls: a lost connection costs one call,
never the worker.

On a connection error (or a transient one: SQLite's "database is locked", a
serialisation failure, a deadlock) the guard closes the connection, backs off
(0.1 s doubling to 5 s) and returns None; the worker keeps what it could not write
and tries again. Any other database error is raised: it is not the connection's.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connections

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
        except DatabaseError as exc:
            if not is_connection_error(exc):
                raise
            self.failures += 1
            wait = self.backoff()
            logger.warning(
                "database error (%s); reconnecting in %.1fs", str(exc).strip()[:200], wait
            )
            with contextlib.suppress(Exception):  # the connection is already broken
                connections[self.alias].close()
            self.retry_at = time.monotonic() + wait
            self.stopping.wait(wait)
            return None
        if self.failures:
            logger.info("database connection restored")
            self.failures = 0
        return result

    def backoff(self) -> float:
        return float(min(0.1 * 2 ** max(self.failures - 1, 0), 5.0))

    @property
    def waiting(self) -> bool:
        """Whether the last call failed and its back-off has not run out yet."""
        return bool(self.failures) and time.monotonic() < self.retry_at


# MySQL/MariaDB: the driver raises OperationalError for much that is the statement's fault
# (a trigger's SIGNAL, a bad value); only these server codes (and the client's own, 2000
# to 2999: cannot connect, server gone, lost connection) are the connection's or
# transient: too many connections, shutdown, aborted or broken packets, lock wait
# timeout, deadlock, connection killed, client disconnected. (Not 1153, a statement over
# max_allowed_packet: sending it again cannot help.)
_MYSQL_TRANSIENT = {1040, 1053, 1152, 1158, 1159, 1160, 1161, 1205, 1213, 1927, 4031}


def is_connection_error(exc: BaseException) -> bool:
    cause = exc.__cause__
    if type(cause).__module__.startswith("MySQLdb") and cause is not None and cause.args:
        code = cause.args[0]
        if isinstance(code, int) and not isinstance(exc, InterfaceError):
            return 2000 <= code < 3000 or code in _MYSQL_TRANSIENT
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    # "database is locked" on SQLite and serialisation failures are transient too.
    text = str(exc).lower()
    return "locked" in text or "could not serialize" in text or "deadlock" in text
