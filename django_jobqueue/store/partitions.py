"""The journal's partitions by time (PostgreSQL): which to make ahead, which retention
drops, when the parent is analyzed, and the swap of an installation's journal to a
partitioned one and back. The dialect runs the statements
(``dialects/postgresql/partitions.py``); this module decides the ranges.

A partition holds one period (a UTC day, an ISO week from Monday, or a calendar month)
of ``recorded_at``. Why by time: the journal only grows and is read by time (the
dashboard's windows, the admin's date range) or by job (whose entries are recorded from
its creation on), so a query names the few partitions it needs; and an old period goes
whole (``DROP TABLE``) instead of row by row, leaving no dead rows for vacuum.

The jobs table is left as it is: its claimable rows must stay in one small hot table,
and a finished job is deleted once, by RETENTION, in short batches.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import timezone

from django_jobqueue.conf import JOURNAL_PERIODS
from django_jobqueue.errors import PartitionError
from django_jobqueue.store import sql
from django_jobqueue.store.dialects.base.partitions import JournalLayout, Partition
from django_jobqueue.store.tables import STATISTICS_LOCK

PERIODS = JOURNAL_PERIODS
# How long making or dropping a partition waits for the journal's lock before leaving it
# to the next run: the settlements queue behind a waiting DROP no longer than this.
LOCK_WAIT = timedelta(milliseconds=500)
# The advisory lock under which one worker at a time analyzes the journal's parent: the
# statistics' own (``tables.STATISTICS_LOCK``), its second key the journal's.
ANALYZE_LOCK = (STATISTICS_LOCK[0], 1)
# A job's entries are recorded from its creation on; this much earlier is still read,
# for hosts whose clocks disagree.
CLOCK_SKEW = timedelta(hours=1)


def _period(period: str) -> str:
    if period not in PERIODS:
        raise PartitionError(f"period must be one of {', '.join(PERIODS)}, not {period!r}")
    return period


def period_start(moment: datetime, period: str) -> datetime:
    """The start (UTC) of the period that holds ``moment``."""
    day = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if _period(period) == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    return day


def next_start(start: datetime, period: str) -> datetime:
    """The start of the period after the one starting at ``start``."""
    if _period(period) == "month":
        return start.replace(year=start.year + start.month // 12, month=start.month % 12 + 1)
    return start + timedelta(days=7 if period == "week" else 1)


def span(first: datetime, until: datetime, period: str) -> list[tuple[datetime, datetime]]:
    """The periods from the one holding ``first`` to the one holding ``until``."""
    bounds: list[tuple[datetime, datetime]] = []
    lower = period_start(first, period)
    while lower <= until:
        upper = next_start(lower, period)
        bounds.append((lower, upper))
        lower = upper
    return bounds


def _ahead(now: datetime, period: str, ahead: int) -> datetime:
    if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
        raise PartitionError(f"ahead must be a whole number of periods (0 or more), not {ahead!r}")
    until = period_start(now, period)
    for _ in range(ahead):
        until = next_start(until, period)
    return until


def journal_layout() -> JournalLayout | None:
    """The journal's partitions, or None when it is one table (and on SQLite, MariaDB)."""
    return sql.dialect().journal_layout()


def partition_journal(*, period: str, ahead: int, now: datetime | None = None) -> int:
    """Swap the journal for one partitioned by ``period`` (its entries copied, in one
    transaction holding the journal: the workers' settlements wait for it), with the
    current period and ``ahead`` more made, an archive partition holding every older
    entry, and the default one. Returns the entries copied."""
    now = now or timezone.now()
    bounds = span(now, _ahead(now, _period(period), ahead), period)
    return sql.dialect().partition_journal(period=period, bounds=bounds, partitioned=True)


def unpartition_journal() -> int:
    """Swap a partitioned journal back for one table, every entry copied; how many."""
    return sql.dialect().partition_journal(period="", bounds=[], partitioned=False)


def _layout_of(layout: JournalLayout | None) -> JournalLayout:
    found = layout or journal_layout()
    if found is None:
        raise PartitionError("the journal is not partitioned (jobqueue partitions --convert)")
    if found.period not in PERIODS:
        raise PartitionError(
            f"the journal is partitioned, but not by jobqueue (no period in its comment:"
            f" {found.period!r}); make its partitions by hand"
        )
    return found


def make_ahead(
    *, ahead: int, now: datetime | None = None, layout: JournalLayout | None = None
) -> list[datetime] | None:
    """Make every missing partition from the newest one's end to ``ahead`` periods past
    the current one (a gap left while no maintenance ran is filled, and the default
    partition's entries of those ranges moved in). The starts of those made; None when
    a lock was not had in LOCK_WAIT (the rest is left to the next run)."""
    layout = _layout_of(layout)
    now = now or timezone.now()
    ranged = [p for p in layout.partitions if p.upper is not None]
    newest = max((p.upper for p in ranged if p.upper), default=period_start(now, layout.period))
    until = _ahead(now, layout.period, ahead)
    made: list[datetime] = []
    d = sql.dialect()
    for lower, upper in span(newest, until, layout.period):
        if lower < newest:
            continue
        if not d.add_journal_partition(lower, upper, wait=LOCK_WAIT):
            return None
        made.append(lower)
    return made


def expired(layout: JournalLayout, before: datetime) -> list[Partition]:
    """The partitions whose every entry is older than ``before``."""
    return [p for p in layout.partitions if p.upper is not None and p.upper <= before]


def drop_older(*, before: datetime, layout: JournalLayout | None = None) -> list[str] | None:
    """Drop the partitions whose every entry was recorded before ``before``; their
    names (None when a lock was not had in LOCK_WAIT: the rest go next run)."""
    layout = _layout_of(layout)
    dropped: list[str] = []
    d = sql.dialect()
    for partition in expired(layout, before):
        if not d.drop_journal_partition(partition.name, wait=LOCK_WAIT):
            return None
        dropped.append(partition.name)
    return dropped


def analyze_journal(
    *, every: timedelta, now: datetime | None = None, layout: JournalLayout | None = None
) -> bool:
    """ANALYZE the partitioned journal's parent unless it was within ``every`` (or
    another worker is at it: one at a time, as the jobs table's statistics are gathered,
    ``gather_statistics``): autovacuum analyzes the partitions, never the parent, and a
    plan over several partitions without the parent's statistics can go badly wrong.
    Whether this call did."""
    layout = _layout_of(layout)
    now = now or timezone.now()
    if layout.analyzed_at is not None and layout.analyzed_at >= now - every:
        return False
    return sql.dialect().gather_statistics(sql.JOURNAL, lock=ANALYZE_LOCK)
