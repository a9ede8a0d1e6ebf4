"""The queue tables' health, for the dashboard's panel and ``jobqueue health --tables``:
each table's row estimate, dead rows, last (auto)vacuum and analyze and size, what holds
back the cleanup of dead rows, and the warnings they earn against the thresholds
(HEALTH_HORIZON_AGE, HEALTH_DEAD_RATIO and ``DEAD_MIN_ROWS``). What each database can
tell is its dialect's (``store/dialects/*/health.py``); what it cannot is None and said
in ``notes``."""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from datetime import timedelta

from django.apps import apps

from django_jobqueue.formatting import fmt_age
from django_jobqueue.store import sql
from django_jobqueue.store.dialects.base.health import Holder, TableReading, Upkeep

# Dead rows are warned of only from this many: a small table's dead rows cost nothing.
DEAD_MIN_ROWS = 1000


@dataclass(frozen=True)
class TableHealth:
    """The readings, the holders (None: the database cannot tell), the warnings (one
    line each), and what this database does not show."""

    tables: list[TableReading]
    holders: list[Holder] | None
    warnings: list[str]
    notes: tuple[str, ...]
    free_bytes: int | None
    horizon_age: timedelta
    dead_ratio: float


def queue_tables() -> list[str]:
    """The queue's tables: every model of the app, jobs and journal first."""
    names = [m._meta.db_table for m in apps.get_app_config("django_jobqueue").get_models()]
    return sorted(names, key=lambda t: (not t.endswith(("_job", "_journalentry")), t))


def table_health(*, horizon_age: timedelta, dead_ratio: float) -> TableHealth:
    """Read the tables and the horizon, and say what is past the thresholds: a holder
    older than ``horizon_age``, dead rows over ``dead_ratio`` of the live ones (and at
    least DEAD_MIN_ROWS)."""
    d = sql.dialect()
    tables = d.table_readings(queue_tables())
    holders = d.horizon_holders(horizon_age)
    warnings = [
        f"{r.table}: {r.dead:,} dead rows ({_share(r.dead, r.rows)}), over "
        f"HEALTH_DEAD_RATIO ({dead_ratio:.0%}): vacuum is behind, or held back"
        for r in tables
        if r.dead is not None
        and r.dead >= DEAD_MIN_ROWS
        and r.dead > dead_ratio * max(r.rows or 0, 0)
    ]
    warnings += [f"{describe(h)}: {_holding(h)}" for h in holders or []]
    return TableHealth(
        tables=tables,
        holders=holders,
        warnings=warnings,
        notes=tuple(d.health_notes),
        free_bytes=d.free_bytes(),
        horizon_age=horizon_age,
        dead_ratio=dead_ratio,
    )


def _share(dead: int, live: int | None) -> str:
    """The dead rows' share of the live ones, as the warning says it ("no live rows"
    rather than a share of none)."""
    if not live:
        return "and no live rows"
    return f"{dead / live:.0%} of {live:,} live"


def _holding(h: Holder) -> str:
    if h.holds is None:
        return "may hold back the cleanup of dead rows"
    if h.holds:
        return "holds back the cleanup of dead rows (the vacuum horizon)"
    return (
        "open too long: it holds back the cleanup of dead rows whenever it runs a "
        "statement, and its locks all along"
    )


def describe(h: Holder) -> str:
    """One line naming a holder: what, which, who, its state and its age."""
    who = ", ".join(x for x in (h.user, h.application) if x)
    parts = [f"{h.what} {h.name}"]
    if who:
        parts.append(f"({who})")
    if h.state:
        parts.append(h.state)
    if h.age_seconds is not None:
        parts.append(f"open {fmt_age(h.age_seconds)}")
    if h.xid_age is not None:
        parts.append(f"{h.xid_age:,} transactions behind")
    return " ".join(parts)


# The jobs table's planner statistics are gathered again once it grew by this many rows
# plus this share of the table since they last were: at the next look (a claim of a
# table the planner thinks empty reads and sorts every pending row). Rows changed in
# place past the same threshold (a drain's claims and settlements, releases, retries)
# have them gathered too, but at most every STATISTICS_CHANGED_EVERY, autovacuum's own
# pace (its threshold is 50 rows plus a tenth, looked at once a minute by default, and
# never with autovacuum off): with the table's size known, jobs made pending by an
# UPDATE are claimed through the claim index whatever the statistics say of them (100,000
# waiting rows made pending, statistics from before: an index scan of 16 rows, 0.46 ms),
# while each ANALYZE (70-85 ms for 20,000 rows) stopped the worker that ran it, and a
# drain of 20,000 no-ops by two workers ran 3 or 4 of them.
STATISTICS_ROWS = 1000
STATISTICS_SHARE = 0.1
STATISTICS_CHANGED_EVERY = timedelta(minutes=1)
# One worker at a time gathers them (an advisory lock's two keys, the first naming ours).
STATISTICS_LOCK = (zlib.crc32(b"django_jobqueue.statistics") - 2**31, 0)


def upkeep_due(*, idle: bool = False) -> Upkeep:
    """What the jobs table is due: its planner statistics gathered again (they are
    stale: ``STATISTICS_ROWS``), a vacuum (dead row versions pile up and this session
    may vacuum it; sooner when ``idle``: no run going in the worker that asks). One row
    of ``pg_stat_user_tables``; nothing due where the database keeps no such statistics
    or no dead versions."""
    share, up_to = (
        (VACUUM_IDLE_SHARE, VACUUM_IDLE_SHARE_OF) if idle else (VACUUM_SHARE, VACUUM_SHARE_OF)
    )
    return sql.dialect().upkeep_due(
        sql.JOB,
        analyze=(STATISTICS_ROWS, STATISTICS_SHARE, math.inf),
        vacuum=(VACUUM_ROWS, share, up_to),
        changed_every=STATISTICS_CHANGED_EVERY,
    )


def gather_statistics() -> bool:
    """Gather the jobs table's planner statistics now, unless another worker is; whether
    it did.

    A claim is planned from them: a table bulk-loaded since its last ANALYZE looks
    empty to the planner, which then claims 16 jobs by reading and sorting every
    pending row (measured on PostgreSQL 15, 100,000 pending: 68 ms a claim, against
    0.05 ms by the claim index once analyzed).
    """
    return sql.dialect().gather_statistics(sql.JOB, lock=STATISTICS_LOCK)


# The jobs table is vacuumed once this many dead row versions plus this share of its
# rows pile up. A claim walks, from the front of the claim index, past the entries of
# every row claimed since the last vacuum (a claimed row leaves the index's condition,
# but its entry stays until a vacuum): 100,000 drained made a claim of an empty queue
# read 1,044 pages (1.3 ms, against 0.05 ms), and a drain of 100,000 a fifth slower
# than one of 10,000. 10,000 entries are about a hundred pages; the share keeps the
# vacuum's own cost (it reads each index whole) a small part of the work that made them.
# The share is of the table's rows up to VACUUM_SHARE_OF at most: the rows a claim walks
# past are the drained ones, not the finished history beside them, and with 10 million
# finished jobs kept (RETENTION keeps them forever by default) a share of every row let
# 400,000 dead entries pile up in the claim index: a claim of an empty queue read 2,329
# pages (6 ms, against 36 pages and 0.14 ms with no history), a pickup took 4x as long.
VACUUM_ROWS = 10_000
VACUUM_SHARE = 0.05
VACUUM_SHARE_OF = 2_000_000
# A worker with no run going (its queue keeps up: jobs one at a time, or none) vacuums
# sooner: a share of every row, a fiftieth of the busy share, so that what its next
# pickups walk past stays near VACUUM_ROWS in a big table too. With 10 million
# finished jobs kept, up to 110,000 dead entries made a claim of an empty queue read
# 222 pages (0.2 ms, against 1 page and 0.04 ms once vacuumed) and the pickup 1.3x an
# empty database's. There the idle threshold is 30,000, and the vacuum's cost (it reads
# every index whole: 1.9 s here for the 10 million rows) about 60 us of the server's
# time a job, spent when no run is waiting on it. Never above the busy threshold (the
# two meet at 110,000, from 10^8 rows).
VACUUM_IDLE_SHARE = 0.002
VACUUM_IDLE_SHARE_OF = VACUUM_SHARE_OF * VACUUM_SHARE / VACUUM_IDLE_SHARE


def vacuum_jobs() -> bool:
    """Vacuum the jobs table now (outside any transaction); whether it did."""
    return sql.dialect().vacuum_table(sql.JOB)
