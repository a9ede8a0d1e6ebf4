"""The journal's partitions, as the portable dialect (SQLite's, MariaDB's) answers: there
are none. Only PostgreSQL partitions the journal (``postgresql/partitions.py``); on the
others the journal stays one table and retention deletes its rows, so every question
here has the one answer "not partitioned" and every change is refused, naming the
database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django_jobqueue.errors import PartitionError
from django_jobqueue.store.dialects.base.primitives import Primitives


@dataclass(frozen=True)
class Partition:
    """One partition of the journal: its table, its range (``lower`` None: from the
    beginning of time, the archive a conversion made; both None: the default partition,
    which takes what no range does), and the planner's estimate of its rows."""

    name: str
    lower: datetime | None
    upper: datetime | None
    rows: int
    bytes: int

    @property
    def default(self) -> bool:
        return self.lower is None and self.upper is None


@dataclass(frozen=True)
class JournalLayout:
    """The partitioned journal: its period (``day``, ``week`` or ``month``), its
    partitions by range (the default one last), and when its parent was last analyzed."""

    period: str
    partitions: list[Partition]
    analyzed_at: datetime | None


class PartitionStatements(Primitives):
    """No partitions: the journal is one table on this database."""

    def journal_layout(self) -> JournalLayout | None:
        """The journal's partitions, or None when it is one table."""
        return None

    def _refuse(self) -> PartitionError:
        return PartitionError(
            f"the journal can be partitioned on PostgreSQL only, not on {self.conn.display_name}"
            " (its journal stays one table, and RETENTION deletes its rows)"
        )

    def partition_journal(
        self, *, period: str, bounds: Sequence[tuple[datetime, datetime]], partitioned: bool
    ) -> int:
        raise self._refuse()

    def add_journal_partition(self, lower: datetime, upper: datetime, *, wait: timedelta) -> bool:
        raise self._refuse()

    def drop_journal_partition(self, name: str, *, wait: timedelta) -> bool:
        raise self._refuse()

    def delete_default_journal(self, *, before: datetime) -> int:
        raise self._refuse()
