"""PostgreSQL's table health: ``pg_class`` and ``pg_stat_user_tables`` for the tables,
and for the vacuum horizon the three things that hold it back: a session whose
transaction (or snapshot) has been open too long (``pg_stat_activity``: ``backend_xmin``
or ``backend_xid`` set, ``xact_start`` old), a replication slot that is not being
consumed (``pg_replication_slots``), and a prepared transaction left behind
(``pg_prepared_xacts``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from django.db import transaction

from django_jobqueue.store.dialects.base.health import (
    NOTHING_DUE,
    HealthReadings,
    Holder,
    TableReading,
    Threshold,
    Upkeep,
)

# The statistics and the sessions are read once per transaction and kept for the rest of
# it: inside a transaction (a test's, ATOMIC_REQUESTS) a second look would see the first.
_FRESH = "SELECT pg_stat_clear_snapshot()"
# A partitioned table (the journal, once partitioned) holds nothing itself: its rows,
# dead rows, vacuums and size are its partitions' (summed, the latest); its last manual
# analyze is its own (the maintenance's scheduled ANALYZE of the parent).
_TABLES = (
    "SELECT c.relname, t.reltuples, t.live, t.dead, t.vac, t.autovac, s.last_analyze,"
    " t.autoan, t.size"
    " FROM pg_class AS c LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid"
    " CROSS JOIN LATERAL (SELECT CASE WHEN bool_and(k.reltuples < 0) THEN -1"
    " ELSE sum(greatest(k.reltuples, 0)) END::bigint AS reltuples,"
    " sum(p.n_live_tup) AS live, sum(p.n_dead_tup) AS dead, max(p.last_vacuum) AS vac,"
    " max(p.last_autovacuum) AS autovac, max(p.last_autoanalyze) AS autoan,"
    " coalesce(sum(pg_total_relation_size(k.oid)), 0) AS size"
    " FROM (SELECT relid FROM pg_partition_tree(c.oid) WHERE isleaf"
    " UNION ALL SELECT c.oid WHERE c.relkind = 'r') AS leaf"
    " JOIN pg_class AS k ON k.oid = leaf.relid"
    " LEFT JOIN pg_stat_user_tables AS p ON p.relid = leaf.relid) AS t"
    " WHERE c.relkind IN ('r', 'p') AND c.relname = ANY(%s) AND pg_table_is_visible(c.oid)"
)
# Client sessions of this database (a transaction elsewhere does not hold back this
# database's tables) other than the one asking, whose transaction began before the
# threshold; whether it holds a snapshot or a transaction id now.
_SESSIONS = (
    "SELECT pid, coalesce(usename, ''), coalesce(application_name, ''), coalesce(state, ''),"
    " extract(epoch FROM clock_timestamp() - xact_start)::float8,"
    " backend_xmin IS NOT NULL OR backend_xid IS NOT NULL"
    " FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    " AND backend_type = 'client backend'"
    " AND xact_start < clock_timestamp() - %s ORDER BY xact_start"
)
# A slot holds the horizon while it is not consumed: inactive with an xmin of its own.
_SLOTS = (
    "SELECT slot_name, slot_type, age(coalesce(xmin, catalog_xmin))::bigint"
    " FROM pg_replication_slots"
    " WHERE NOT active AND coalesce(xmin, catalog_xmin) IS NOT NULL ORDER BY slot_name"
)
_PREPARED = (
    "SELECT gid, owner, extract(epoch FROM clock_timestamp() - prepared)::float8"
    " FROM pg_prepared_xacts WHERE database = current_database()"
    " AND prepared < clock_timestamp() - %s ORDER BY prepared"
)


# What the jobs table is due, in one row. Its statistics are stale once it grew by more
# rows than the first threshold since the planner last counted them (live rows against
# ``reltuples``, -1 before the first count: none), or once that many rows changed in
# place (claims, settlements, releases) and its last ANALYZE, manual or automatic, is
# older than the interval given. Its dead row versions are past the second threshold,
# and this session may vacuum it (its owner's member, or a superuser: another role's
# VACUUM would only warn and skip it).
_UPKEEP = (
    "SELECT s.n_live_tup - t.rows > t.stale OR s.n_mod_since_analyze > t.stale"
    " AND coalesce(greatest(s.last_analyze, s.last_autoanalyze) < clock_timestamp() - %s, true),"
    " s.n_dead_tup > t.piling AND pg_has_role(c.relowner, 'USAGE')"
    " FROM pg_class AS c JOIN pg_stat_user_tables AS s ON s.relid = c.oid"
    " CROSS JOIN LATERAL (SELECT greatest(c.reltuples, 0) AS rows) AS r"
    " CROSS JOIN LATERAL (SELECT r.rows, %s + %s * least(r.rows, %s) AS stale,"
    " %s + %s * least(r.rows, %s) AS piling) AS t"
    " WHERE c.relname = %s AND pg_table_is_visible(c.oid)"
)


class PostgreSQLHealth(HealthReadings):
    health_notes: tuple[str, ...] = ()

    def table_readings(self, tables: Sequence[str]) -> list[TableReading]:
        """Row estimates (the statistics' live rows, else the planner's ``reltuples``:
        -1 until the table was first vacuumed or analyzed), dead rows, the last vacuum and
        analyze of each kind, and the size with indexes and TOAST."""
        self.run(_FRESH, [])
        readings = []
        for name, reltuples, live, dead, vac, autovac, an, autoan, size in self.run(
            _TABLES, [list(tables)]
        ):
            estimate = live if live is not None else (reltuples if reltuples >= 0 else None)
            readings.append(
                TableReading(
                    table=name,
                    rows=None if estimate is None else int(estimate),
                    dead=None if dead is None else int(dead),
                    last_vacuum=vac,
                    last_autovacuum=autovac,
                    last_analyze=an,
                    last_autoanalyze=autoan,
                    size_bytes=int(size),
                    tracks_vacuum=True,
                    tracks_analyze=True,
                )
            )
        return sorted(readings, key=lambda r: tables.index(r.table))

    def free_bytes(self) -> int | None:
        return None

    def horizon_holders(self, older_than: timedelta) -> list[Holder] | None:
        self.run(_FRESH, [])
        found = [
            Holder(
                what="transaction",
                name=f"pid {pid}",
                user=user,
                application=app,
                state=state,
                age_seconds=age,
                holds=holds,
            )
            for pid, user, app, state, age, holds in self.run(_SESSIONS, [older_than])
        ]
        found += [
            Holder(what="replication slot", name=slot, state=f"inactive {kind} slot", xid_age=age)
            for slot, kind, age in self.run(_SLOTS, [])
        ]
        found += [
            Holder(
                what="prepared transaction", name=gid, user=owner, state="prepared", age_seconds=age
            )
            for gid, owner, age in self.run(_PREPARED, [older_than])
        ]
        return found

    def upkeep_due(
        self, table: str, *, analyze: Threshold, vacuum: Threshold, changed_every: timedelta
    ) -> Upkeep:
        """One statement, and a second only inside a transaction (where the statistics
        read first would be kept for the rest of it; a worker asks in autocommit)."""
        if self.conn.in_atomic_block:
            self.run(_FRESH, [])
        found = self.run(_UPKEEP, [changed_every, *analyze, *vacuum, table])
        if not found:
            return NOTHING_DUE
        stale, piling = found[0]
        return Upkeep(analyze=bool(stale), vacuum=bool(piling))

    def gather_statistics(self, table: str, *, lock: tuple[int, int]) -> bool:
        with transaction.atomic(using=self.alias):  # the lock is the transaction's
            if not self.run("SELECT pg_try_advisory_xact_lock(%s, %s)", list(lock))[0][0]:
                return False
            self.run(f"ANALYZE {self.conn.ops.quote_name(table)}", [])
        return True

    def vacuum_table(self, table: str) -> bool:
        """``SKIP_LOCKED``: a table another session is vacuuming (another worker, or
        autovacuum) is left to it. ``INDEX_CLEANUP ON``: the index entries are what this
        vacuum is for, and PostgreSQL would otherwise skip the indexes when the dead
        rows sit on under 2 % of the table's pages (a drain's do, in a big table)."""
        if self.conn.in_atomic_block:
            return False  # VACUUM cannot run in a transaction
        self.run(f"VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {self.conn.ops.quote_name(table)}", [])
        return True
