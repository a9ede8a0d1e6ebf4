"""PostgreSQL's partitioned journal: the journal as a table partitioned by range of
``recorded_at`` (declarative partitioning), its partitions made ahead, dropped whole by
retention, and its parent analyzed on a schedule (autovacuum analyzes the partitions,
never a partitioned parent, whose statistics the planner needs for any query that spans
partitions).

Why the primary key is ``(id, recorded_at)``: a partitioned table's unique constraints
must hold its partition key. Ids still come from the one identity sequence, so they stay
unique; the model keeps ``id`` as its primary key (Django reads and writes rows by it,
nothing points at an entry by a database constraint), and no other constraint changes.

Why a default partition: a settlement whose entry found no partition would fail, and
a settlement must never fail for want of one. The maintenance makes partitions periods
ahead, so the default one stays empty; if it ever holds entries (the maintenance stopped
for longer than that, or a clock far off), making the partition of their range moves
them into it, in the same transaction.

Locks: a partition is made as a table of its own and attached (``ATTACH PARTITION``
locks the parent in SHARE UPDATE EXCLUSIVE mode, which neither settlements nor reads
wait for); dropping one needs the parent exclusively for a moment, so it waits at most
``wait`` for the lock and otherwise gives up until the next run, never queueing the
settlements behind it for longer.

Partition bounds are DDL, which takes no parameters: the bounds are datetimes the store
computed, rendered by psycopg's ``Literal``; names are the model's table's and the
catalog's, quoted by the connection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, OperationalError, ProgrammingError, transaction

from django_jobqueue.errors import PartitionError
from django_jobqueue.models import JournalEntry
from django_jobqueue.store.dialects.base.partitions import (
    JournalLayout,
    Partition,
    PartitionStatements,
)

JOURNAL = JournalEntry._meta.db_table
KEY = "recorded_at"
_MARK = "django_jobqueue partitions: "  # the parent's comment, then its period
_LAYOUT = (
    "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid),"
    " greatest(c.reltuples, 0)::bigint, pg_total_relation_size(c.oid)"
    " FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid"
    " WHERE i.inhparent = %s::regclass"
)
_BOUND = re.compile(r"FROM \((.+)\) TO \((.+)\)")
_INDEXDEF = re.compile(r"^(CREATE (?:UNIQUE )?INDEX \S+ ON )(?:ONLY )?\S+( USING .*)$")
_ANALYZED = "SELECT last_analyze FROM pg_stat_user_tables WHERE relid = %s::regclass"


class PostgreSQLPartitions(PartitionStatements):
    def _ddl(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Through Django's cursor (not psycopg's prepared one, as the hot statements):
        these run a few times a day, are mostly DDL, and are seen by whatever watches
        Django's queries (``CaptureQueriesContext``, ``execute_wrapper``)."""
        with self.conn.cursor() as cursor:
            cursor.execute(statement, params or None)
            return cursor.fetchall() if cursor.description else []

    def _q(self, name: str) -> str:
        return str(self.conn.ops.quote_name(name))

    def _literal(self, value: datetime) -> str:
        from psycopg.sql import Literal

        return str(Literal(value).as_string(self.conn.connection))

    def journal_layout(self) -> JournalLayout | None:
        comment = self._ddl(
            "SELECT c.relkind, obj_description(c.oid, 'pg_class') FROM pg_class AS c"
            " WHERE c.oid = to_regclass(%s)",
            [JOURNAL],
        )
        if not comment or comment[0][0] != "p":
            return None
        note = comment[0][1] or ""
        period = note[len(_MARK) :] if note.startswith(_MARK) else ""
        parts: list[Partition] = []
        for name, bound, rows, size in self._ddl(_LAYOUT, [JOURNAL]):
            lower = upper = None
            found = _BOUND.search(bound or "")
            if found:
                lower, upper = (self._bound(v) for v in found.groups())
            parts.append(Partition(name, lower, upper, int(rows), int(size)))
        self._ddl("SELECT pg_stat_clear_snapshot()", [])
        analyzed = self._ddl(_ANALYZED, [JOURNAL])
        parts.sort(key=lambda p: (p.default, p.lower is not None, p.lower or datetime.min))
        return JournalLayout(period, parts, analyzed[0][0] if analyzed else None)

    def _bound(self, text: str) -> datetime | None:
        if text == "MINVALUE":
            return None
        # As the session (UTC, Django's) writes it: '2026-12-01 00:00:00+00'.
        return datetime.fromisoformat(text.strip("'"))

    def partition_journal(
        self, *, period: str, bounds: Sequence[tuple[datetime, datetime]], partitioned: bool
    ) -> int:
        """Swap the journal for a partitioned copy (``partitioned``; ``bounds``: the
        partitions made ahead, an archive partition below the first holding every
        older entry, and the default one) or back for one table, in one transaction
        holding the journal exclusively: every entry copied, the ids' sequence carried
        on, the indexes remade under their names. Returns the entries copied."""
        with transaction.atomic(using=self.alias):
            self._ddl(f"LOCK TABLE {self._q(JOURNAL)} IN ACCESS EXCLUSIVE MODE", [])
            is_partitioned = self.journal_layout() is not None
            if is_partitioned == partitioned:
                state = "already partitioned" if partitioned else "not partitioned"
                raise PartitionError(f"the journal is {state}: nothing to do")
            new = f"{JOURNAL}_swap"
            indexes = self._indexes_aside()
            by = f" PARTITION BY RANGE ({self._q(KEY)})" if partitioned else ""
            self._ddl(
                f"CREATE TABLE {self._q(new)} (LIKE {self._q(JOURNAL)} INCLUDING DEFAULTS"
                f" INCLUDING CONSTRAINTS INCLUDING IDENTITY INCLUDING STORAGE){by}",
                [],
            )
            if partitioned:
                self._partitions(new, bounds)
            copied = self._ddl(
                f"WITH c AS (INSERT INTO {self._q(new)} SELECT * FROM {self._q(JOURNAL)}"
                " RETURNING 1) SELECT count(*) FROM c",
                [],
            )[0][0]
            self._carry_sequence(new)
            key = f"(id, {self._q(KEY)})" if partitioned else "(id)"
            self._ddl(
                f"ALTER TABLE {self._q(new)} ADD CONSTRAINT {self._q(JOURNAL + '_pkey')}"
                f" PRIMARY KEY {key}",
                [],
            )
            for definition in indexes:
                self._ddl(_INDEXDEF.sub(rf"\g<1>{self._q(new)}\g<2>", definition), [])
            self._ddl(f"DROP TABLE {self._q(JOURNAL)}", [])
            self._ddl(f"ALTER TABLE {self._q(new)} RENAME TO {self._q(JOURNAL)}", [])
            sequence = self._ddl("SELECT pg_get_serial_sequence(%s, 'id')", [JOURNAL])[0][0]
            self._ddl(f"ALTER SEQUENCE {sequence} RENAME TO {self._q(JOURNAL + '_id_seq')}", [])
            if partitioned:
                self._ddl(
                    f"COMMENT ON TABLE {self._q(JOURNAL)} IS {self._literal_text(_MARK + period)}",
                    [],
                )
            return int(copied)

    def _literal_text(self, text: str) -> str:
        from psycopg.sql import Literal

        return str(Literal(text).as_string(self.conn.connection))

    def _indexes_aside(self) -> list[str]:
        """The journal's indexes but its primary key, as their definitions; each renamed
        out of the way (and the primary key too), so the copy's take their names."""
        rows = self._ddl(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisprimary, i.indisunique"
            " FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = %s::regclass ORDER BY c.relname",
            [JOURNAL],
        )
        unique = [name for name, _, primary, uniq in rows if uniq and not primary]
        if unique:
            raise PartitionError(
                f"the journal has unique indexes other than its primary key ({', '.join(unique)}):"
                " a partitioned table's unique indexes must hold recorded_at; drop or"
                " change them first"
            )
        definitions: list[str] = []
        for n, (name, definition, primary, _) in enumerate(rows):
            aside = self._q(f"jobqueue_swap_aside_{n}")
            if primary:
                self._ddl(
                    f"ALTER TABLE {self._q(JOURNAL)} RENAME CONSTRAINT {self._q(name)} TO {aside}",
                    [],
                )
                continue
            definitions.append(definition)
            self._ddl(f"ALTER INDEX {self._q(name)} RENAME TO {aside}", [])
        return definitions

    def _partitions(self, parent: str, bounds: Sequence[tuple[datetime, datetime]]) -> None:
        first = bounds[0][0]
        self._ddl(
            f"CREATE TABLE {self._q(JOURNAL + '_archive')} PARTITION OF {self._q(parent)}"
            f" FOR VALUES FROM (MINVALUE) TO ({self._literal(first)})",
            [],
        )
        for lower, upper in bounds:
            self._ddl(
                f"CREATE TABLE {self._q(self._name(lower))} PARTITION OF {self._q(parent)}"
                f" FOR VALUES FROM ({self._literal(lower)}) TO ({self._literal(upper)})",
                [],
            )
        self._ddl(
            f"CREATE TABLE {self._q(JOURNAL + '_default')} PARTITION OF {self._q(parent)} DEFAULT",
            [],
        )

    def _name(self, lower: datetime) -> str:
        return f"{JOURNAL}_p{lower:%Y%m%d}"

    def _carry_sequence(self, new: str) -> None:
        """The copy's ids go on from where the journal's left off."""
        old = self._ddl("SELECT pg_get_serial_sequence(%s, 'id')", [JOURNAL])[0][0]
        fresh = self._ddl("SELECT pg_get_serial_sequence(%s, 'id')", [new])[0][0]
        last = self._ddl(f"SELECT last_value, is_called FROM {old}", [])[0]
        top = self._ddl(f"SELECT max(id) FROM {self._q(new)}", [])[0][0] or 0
        value, called = max((int(last[0]), bool(last[1])), (int(top), True))
        self._ddl("SELECT setval(%s, %s, %s)", [fresh, max(value, 1), called and value > 0])

    def add_journal_partition(self, lower: datetime, upper: datetime, *, wait: timedelta) -> bool:
        """Make the partition of ``[lower, upper)`` and attach it, with the default
        partition's entries of that range moved into it; False when a lock was not had
        within ``wait`` (nothing done: the next run tries again)."""
        name = self._q(self._name(lower))
        lo, hi = self._literal(lower), self._literal(upper)
        default = self._q(JOURNAL + "_default")
        check = self._q(f"{self._name(lower)}_bounds")

        def attach() -> None:
            self._ddl(f"SET LOCAL lock_timeout = {int(wait.total_seconds() * 1000)}", [])
            self._ddl(
                f"CREATE TABLE {name} (LIKE {self._q(JOURNAL)} INCLUDING DEFAULTS"
                " INCLUDING CONSTRAINTS INCLUDING STORAGE)",
                [],
            )
            # Lets ATTACH skip its scan of the new table.
            self._ddl(
                f"ALTER TABLE {name} ADD CONSTRAINT {check}"
                f" CHECK ({KEY} IS NOT NULL AND {KEY} >= {lo} AND {KEY} < {hi})",
                [],
            )
            self._ddl(
                f"WITH moved AS (DELETE FROM {default} WHERE {KEY} >= {lo} AND {KEY} < {hi}"
                f" RETURNING *) INSERT INTO {name} SELECT * FROM moved",
                [],
            )
            self._ddl(
                f"ALTER TABLE {self._q(JOURNAL)} ATTACH PARTITION {name}"
                f" FOR VALUES FROM ({lo}) TO ({hi})",
                [],
            )
            self._ddl(f"ALTER TABLE {name} DROP CONSTRAINT {check}", [])

        return self._within_lock_timeout(attach)

    def drop_journal_partition(self, name: str, *, wait: timedelta) -> bool:
        """Drop one partition, waiting at most ``wait`` for the parent's lock (False:
        not had; the next run tries again)."""

        def drop() -> None:
            self._ddl(f"SET LOCAL lock_timeout = {int(wait.total_seconds() * 1000)}", [])
            # IF EXISTS: another worker's drop of it may have committed first.
            self._ddl(f"DROP TABLE IF EXISTS {self._q(name)}", [])

        return self._within_lock_timeout(drop)

    def _within_lock_timeout(self, change: Any) -> bool:
        """Run ``change`` in its own transaction; False when a lock was not had in time.
        A partition another worker made at the same moment counts as made."""
        try:
            with transaction.atomic(using=self.alias):
                change()
        except (OperationalError, ProgrammingError, IntegrityError) as exc:
            state = getattr(exc.__cause__, "sqlstate", None)
            if state == "55P03":  # lock_not_available
                return False
            # The table's name taken by another worker's, committed first: duplicate_table,
            # or the catalog's unique_violation when both created it at once.
            if state in ("42P07", "23505"):
                return True
            raise
        return True

    def delete_default_journal(self, *, before: datetime) -> int:
        """Delete the default partition's entries older than ``before`` (it is empty
        while the maintenance keeps partitions ahead)."""
        rows = self._ddl(
            f"WITH d AS (DELETE FROM {self._q(JOURNAL + '_default')} WHERE {KEY} < %s"
            " RETURNING 1) SELECT count(*) FROM d",
            [before],
        )
        return int(rows[0][0])
