"""MySQL's and MariaDB's storage half of their dialect (see ``dialects.base``): no
upsert with a condition, no RETURNING, no partial unique index, so keyed inserts and
rate tokens take a few statements there; connection errors are told by server code."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, ClassVar, TypeVar

from django.core.checks import CheckMessage, Warning
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import UniqueConstraint

from django_jobqueue.store.dialects.base.storage import (
    BUCKET,
    MERGE_LOCK,
    NewRow,
    StorageStatements,
)

T = TypeVar("T")

# The driver raises OperationalError for much that is the statement's fault (a trigger's
# SIGNAL, a bad value); only these server codes (and the client's own, 2000 to 2999:
# cannot connect, server gone, lost connection) are the connection's or transient: too
# many connections, shutdown, aborted or broken packets, lock wait timeout, deadlock,
# connection killed, client disconnected. (Not 1153, a statement over
# max_allowed_packet: sending it again cannot help.)
TRANSIENT_CODES = frozenset({1040, 1053, 1152, 1158, 1159, 1160, 1161, 1205, 1213, 1927, 4031})
# Error 1213, "Deadlock found when trying to get lock": InnoDB rolls the whole
# transaction back, and the manual's advice is to run it again.
DEADLOCK = 1213


def server_code(exc: BaseException) -> int | None:
    """The MySQL/MariaDB error code behind a Django database error, if the driver's."""
    cause = exc.__cause__
    if cause is None or not type(cause).__module__.startswith("MySQLdb") or not cause.args:
        return None
    code = cause.args[0]
    return code if isinstance(code, int) else None


class MySQLStorage(StorageStatements):
    """MySQL: inserts, tokens, journal deletion, percentiles, wake-ups, errors, transactions."""

    minimum_version: ClassVar[tuple[int, ...]] = (8, 0, 1)
    mariadb_minimum: ClassVar[tuple[int, ...]] = (10, 6)
    claim_needs: ClassVar[str] = "SELECT ... FOR UPDATE SKIP LOCKED"
    max_params: ClassVar[int] = 32766  # MySQL's is twice SQLite's; this is enough
    # Well within the server's max_allowed_packet (16 MiB by default) however large
    # the payloads.
    statement_bytes: ClassVar[int | None] = 4 * 1024 * 1024

    @classmethod
    def configuration_problems(
        cls, alias: str, database: Mapping[str, Any], *, concurrency: int
    ) -> list[CheckMessage]:
        """W010 saying what differs here (docs/explanation/databases.md has the table); W011 too
        when the isolation level is above READ COMMITTED."""
        options = database.get("OPTIONS") or {}
        isolation = str(options.get("isolation_level") or "read committed")
        messages: list[CheckMessage] = []
        if isolation.lower() not in ("read committed", "read uncommitted"):
            messages.append(
                Warning(
                    f"The jobs database {alias!r} is MySQL/MariaDB at isolation level "
                    f"{isolation!r}: an enqueue whose idempotency key another transaction "
                    "has just taken cannot see that job from its older snapshot (it fails "
                    "instead of reusing it), and locking reads take gap locks that slow "
                    "concurrent claims.",
                    hint=f"Remove DATABASES[{alias!r}]['OPTIONS']['isolation_level'] "
                    "(Django's default for MySQL is 'read committed') or set it to "
                    "'read committed'.",
                    id="django_jobqueue.W011",
                )
            )
        messages.append(
            Warning(
                f"The jobs database {alias!r} is MySQL/MariaDB: jobs are claimed with SKIP "
                "LOCKED and settled under their guard as on PostgreSQL, but idle workers "
                "poll (no LISTEN/NOTIFY: a new job waits up to POLL_INTERVAL), the indexes "
                "are whole rather than partial (the idempotency key's uniqueness is a "
                "generated column's unique index), a claim or settlement takes a few "
                "statements instead of one, and JSON is stored as checked text.",
                hint="See the feature-by-database table on the Databases page of the "
                "django-jobqueue documentation (explanation/databases); add "
                "'django_jobqueue.W010' to SILENCED_SYSTEM_CHECKS once you have read it.",
                id="django_jobqueue.W010",
            )
        )
        return messages

    @cached_property
    def _mariadb(self) -> bool:
        return bool(getattr(self.conn, "mysql_is_mariadb", False))

    def server(self) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
        """MariaDB, the same vendor to Django, counts its versions differently."""
        name, version, least = super().server()
        if self._mariadb:
            return "MariaDB", version, self.mariadb_minimum
        return name, version, least

    def insert_keyed(self, row: NewRow, *, unique: UniqueConstraint) -> bool:
        """The key's unique index is on a generated column (migration 0008, named as the
        constraint) and ``ON DUPLICATE KEY`` cannot say which key clashed, so the INSERT
        runs in a savepoint and a duplicate of that index means an active job holds it."""
        try:
            with transaction.atomic(using=self.alias):
                self.run(self.insert_sql(1), self.row_params(row))
        except IntegrityError as exc:
            if unique.name not in str(exc):
                raise
            return False
        return True

    def take_tokens(self, *, kind: str, capacity: int, refill: float, count: int) -> float | None:
        """No upsert with a condition and RETURNING: the bucket made full if it is new,
        then locked, refilled and taken from here; unchanged if too few."""
        now = time.time()
        self.run(
            f"INSERT INTO {BUCKET} (kind, tokens, refilled_at) VALUES (%s, %s, %s)"
            " ON DUPLICATE KEY UPDATE kind = kind",
            [kind, float(capacity), now],
        )
        [(tokens, refilled_at)] = self.run(
            f"SELECT tokens, refilled_at FROM {BUCKET} WHERE kind = %s FOR UPDATE", [kind]
        )
        available = min(
            float(capacity), float(tokens) + max(now - float(refilled_at), 0.0) * refill
        )
        if available < count:
            return max(count - available, 0.0) / refill
        self.run(
            f"UPDATE {BUCKET} SET tokens = %s, refilled_at = %s WHERE kind = %s",
            [available - count, max(float(refilled_at), now), kind],
        )
        return None

    def lock_merge(self, name: str) -> None:
        """No ``ON CONFLICT``: the row made if it is new (``ON DUPLICATE KEY`` takes the
        duplicate's write lock, as the rate bucket's does), then locked FOR UPDATE."""
        self.run(
            f"INSERT INTO {MERGE_LOCK} (name) VALUES (%s) ON DUPLICATE KEY UPDATE name = name",
            [name],
        )
        self.run(f"SELECT name FROM {MERGE_LOCK} WHERE name = %s FOR UPDATE", [name])

    def retrying_deadlocks(self, run: Callable[[], T], *, attempts: int = 5) -> T:
        """Run again when InnoDB chose it as a deadlock's victim: two cleanups' batches
        can lock each other's index gaps in opposite orders. Inside a caller's
        transaction (rolled back whole: only the caller can retry) errors pass through."""
        retry = not self.conn.in_atomic_block
        for attempt in range(1, attempts + 1):
            try:
                return run()
            except OperationalError as exc:
                if not retry or server_code(exc) != DEADLOCK or attempt == attempts:
                    raise
                logging.getLogger("django_jobqueue").info("deadlock victim; running it again")
                time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def json_depth_cap(self) -> tuple[int, str] | None:
        """MariaDB's ``JSON_VALID`` check (Django's JSONField column) refuses 32 levels
        or more, MySQL 8's JSON type more than 100."""
        if self._mariadb:
            return (31, "MariaDB's JSON columns")
        return (100, "MySQL's JSON columns")

    def is_connection_error(self, exc: BaseException) -> bool:
        code = server_code(exc)
        if code is not None and not isinstance(exc, InterfaceError):
            return 2000 <= code < 3000 or code in TRANSIENT_CODES
        return super().is_connection_error(exc)
