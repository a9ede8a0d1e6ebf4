"""MySQL's and MariaDB's table health: ``information_schema.TABLES`` (InnoDB's row
estimate, data and index bytes), the persistent statistics' last update
(``mysql.innodb_table_stats``) as the last analyze, and for what holds back InnoDB's
purge of old row versions (its vacuum), the transactions open longer than the threshold
(``information_schema.INNODB_TRX``, with ``PROCESSLIST`` for who and what they do).
InnoDB does not count dead rows per table, and has no vacuum times: those are "not
available". Reading INNODB_TRX and PROCESSLIST needs the PROCESS privilege; without it
the horizon is "not available" too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from django.db import DatabaseError

from django_jobqueue.store.dialects.base.health import HealthReadings, Holder, TableReading

_TABLES = (
    "SELECT TABLE_NAME, TABLE_ROWS, coalesce(DATA_LENGTH, 0) + coalesce(INDEX_LENGTH, 0)"
    " FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ({})"
)
_ANALYZED = (
    "SELECT table_name, last_update FROM mysql.innodb_table_stats"
    " WHERE database_name = DATABASE() AND table_name IN ({})"
)
_TRANSACTIONS = (
    "SELECT t.trx_mysql_thread_id, coalesce(p.USER, ''), coalesce(p.HOST, ''),"
    " coalesce(p.COMMAND, ''), t.trx_state, TIMESTAMPDIFF(SECOND, t.trx_started, NOW())"
    " FROM information_schema.INNODB_TRX AS t"
    " LEFT JOIN information_schema.PROCESSLIST AS p ON p.ID = t.trx_mysql_thread_id"
    " WHERE t.trx_mysql_thread_id <> CONNECTION_ID()"
    # A session that has gone (no PROCESSLIST row) may stay listed a while as its
    # transaction is rolled back (seen for tens of seconds on MariaDB 10.11): it holds
    # nothing new. Thread 0 is a prepared XA transaction, which does hold.
    " AND (p.ID IS NOT NULL OR t.trx_mysql_thread_id = 0)"
    " AND t.trx_started < NOW() - INTERVAL %s SECOND ORDER BY t.trx_started"
)


class MySQLHealth(HealthReadings):
    health_notes: tuple[str, ...] = (
        "InnoDB counts no dead rows per table and keeps no vacuum times (its purge "
        "thread removes old row versions): those are not available. Row counts are "
        "InnoDB's estimates; the last analyze is the persistent statistics' last update.",
    )

    def table_readings(self, tables: Sequence[str]) -> list[TableReading]:
        marks = ", ".join(["%s"] * len(tables))
        rows = self.run(_TABLES.format(marks), list(tables))
        try:
            analyzed = dict(self.run(_ANALYZED.format(marks), list(tables)))
        except DatabaseError:  # no SELECT on the mysql schema: not available
            analyzed = {}
        found = [
            TableReading(
                table=name,
                rows=None if estimate is None else int(estimate),
                last_analyze=self.read_dt(analyzed.get(name)),
                size_bytes=int(size),
                tracks_analyze=bool(analyzed),
            )
            for name, estimate, size in rows
        ]
        return sorted(found, key=lambda r: tables.index(r.table))

    def free_bytes(self) -> int | None:
        return None

    def horizon_holders(self, older_than: timedelta) -> list[Holder] | None:
        try:
            rows = self.run(_TRANSACTIONS, [int(older_than.total_seconds())])
        except DatabaseError:  # no PROCESS privilege
            return None
        return [
            Holder(
                what="transaction",
                name=f"thread {thread}",
                user=user,
                application=host,
                state=f"{trx_state.lower()}, {command.lower()}" if command else trx_state.lower(),
                age_seconds=float(age),
                # Whether it keeps a read view open (REPEATABLE READ after a read, or a
                # write) InnoDB does not say here.
                holds=None,
            )
            for thread, user, host, command, trx_state, age in rows
        ]
