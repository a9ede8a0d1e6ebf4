"""What a database tells of its tables' health (issue 34): row estimates, dead rows, the
last vacuum and analyze, sizes, and what holds back the cleanup of dead rows (the
vacuum horizon on PostgreSQL, InnoDB's purge on MySQL/MariaDB).

The portable way, here, is SQLite's: exact row counts, table sizes from the ``dbstat``
table where SQLite was built with it, the file's free pages, and no horizon (SQLite keeps
no dead rows in its tables: a delete frees the pages at once, reused or given back by
VACUUM). A database that knows more overrides ``table_readings`` and ``horizon_holders``.
A value the database does not give is None, shown as "not available".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError

from django_jobqueue.store.dialects.base.primitives import Primitives


@dataclass(frozen=True)
class Upkeep:
    """What a table is due, by its statistics: its planner statistics gathered again
    (``analyze``) and its dead row versions vacuumed away (``vacuum``)."""

    analyze: bool
    vacuum: bool


NOTHING_DUE = Upkeep(analyze=False, vacuum=False)

# A threshold of rows: this many, plus this share of the table's rows counted up to at
# most this many (``math.inf``: all of them).
Threshold = tuple[int, float, float]


@dataclass(frozen=True)
class TableReading:
    """One table as its database sees it; None: the database does not say."""

    table: str
    rows: int | None  # live rows: an estimate unless ``exact``
    exact: bool = False
    dead: int | None = None  # dead rows (row versions) not yet vacuumed
    last_vacuum: datetime | None = None  # manual VACUUM
    last_autovacuum: datetime | None = None
    last_analyze: datetime | None = None  # manual ANALYZE (or the statistics' refresh)
    last_autoanalyze: datetime | None = None
    size_bytes: int | None = None  # the table with its indexes (and TOAST)
    # Whether the database records vacuums / analyzes at all (else their None is "not
    # available", not "never").
    tracks_vacuum: bool = False
    tracks_analyze: bool = False


@dataclass(frozen=True)
class Holder:
    """Something that keeps dead rows from being cleaned up, or is open long enough to:
    an open transaction (or one idle in its transaction), a replication slot, a
    prepared transaction. ``holds``: it holds the horizon back now (a transaction with
    a snapshot or a transaction id); False: open, but between statements it holds no
    snapshot (PostgreSQL's READ COMMITTED, read only so far): the horizon is held each
    time it runs one, and its locks all along; None: the database does not say."""

    what: str  # "transaction", "replication slot", "prepared transaction"
    name: str  # the backend's pid / thread id, the slot's or the prepared one's name
    user: str = ""
    application: str = ""  # the client's application_name / host
    state: str = ""  # e.g. "idle in transaction", "active", "inactive"
    age_seconds: float | None = None  # since its transaction began (None: no clock)
    xid_age: int | None = None  # transactions since its horizon (slots)
    holds: bool | None = True


class HealthReadings(Primitives):
    """The portable readings (SQLite's)."""

    #: What this database cannot show, said once in the panel and the command.
    health_notes: tuple[str, ...] = (
        "SQLite keeps no dead rows: a delete frees its pages at once (free pages are "
        "reused, or returned by VACUUM). Vacuum and analyze times and the vacuum horizon "
        "are not available.",
    )

    def table_readings(self, tables: Sequence[str]) -> list[TableReading]:
        """Each of ``tables`` that exists: exact row counts and, with ``dbstat``, sizes."""
        existing = set(self.conn.introspection.table_names())
        quote = self.conn.ops.quote_name
        sizes = self._dbstat_sizes()
        return [
            TableReading(
                table=t,
                rows=int(self.run(f"SELECT count(*) FROM {quote(t)}", [])[0][0]),
                exact=True,
                size_bytes=sizes.get(t),
            )
            for t in tables
            if t in existing
        ]

    def _dbstat_sizes(self) -> dict[str, int]:
        """Bytes per table with its indexes, from SQLite's dbstat table (empty without
        it). An index is counted with the table it belongs to."""
        try:
            rows = self.run(
                "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat AS d"
                " LEFT JOIN sqlite_master AS m ON m.name = d.name GROUP BY 1",
                [],
            )
        except DatabaseError:
            return {}
        return {name: int(size) for name, size in rows}

    def free_bytes(self) -> int | None:
        """Bytes in the database file's free pages (SQLite), else None."""
        (pages,) = self.run("PRAGMA freelist_count", [])[0]
        (size,) = self.run("PRAGMA page_size", [])[0]
        return int(pages) * int(size)

    def horizon_holders(self, older_than: timedelta) -> list[Holder] | None:
        """What has held back the cleanup of dead rows for longer than ``older_than``;
        None where the database cannot tell (SQLite has no such horizon)."""
        return None

    def upkeep_due(
        self, table: str, *, analyze: Threshold, vacuum: Threshold, changed_every: timedelta
    ) -> Upkeep:
        """What ``table`` is due, each threshold being rows plus a share of the table's
        rows (up to a number, a ``Threshold``):
        ``analyze`` once it grew by that many rows since its planner statistics were
        gathered, or that many rows changed in place and they were gathered longer than
        ``changed_every`` ago; ``vacuum`` once that many dead row versions are in it
        and this session may vacuum it. Nothing here: only PostgreSQL plans from
        statistics that its autovacuum alone keeps (and only after a minute), SQLite's
        planner keeps none unless asked, and InnoDB recounts a table's by itself once a
        tenth of it changed; SQLite rewrites a row in place, and InnoDB's purge thread
        removes old versions by itself."""
        return NOTHING_DUE

    def gather_statistics(self, table: str, *, lock: tuple[int, int]) -> bool:
        """Gather ``table``'s planner statistics now, unless another session holds
        ``lock`` (an advisory lock's two keys: one worker at a time); whether it did."""
        return False

    def vacuum_table(self, table: str) -> bool:
        """Remove ``table``'s dead row versions and their index entries now, unless
        another session is vacuuming it; whether it did. Outside any transaction."""
        return False
