"""Global limits per kind: the run-time overrides, the enqueue rate buckets, and the lock
keys of ``max_in_flight``.

``max_in_flight`` is enforced inside the claim statement (``claim.py``). On PostgreSQL,
when the claim comes to a pending job of a limited kind it calls
``django_jobqueue_free_slots`` (``dialects/postgresql/sql/``), which takes the transaction-level
advisory locks of all the claim's limited kinds (in key order, so that two claims never
wait for each other in a circle) and then counts the kind's claimed jobs on a snapshot
of its own, newer than the locks: so claims of one kind commit one after another and
each counts what the previous ones claimed. (A count on the statement's snapshot,
taken before it waited for the lock, could miss a claim committed meanwhile.) SQLite
runs one writer at a time, so there a count inside the claim statement is enough.

The rate limit is a token bucket per kind (``RateBucket``): an enqueue takes its tokens
in one upsert that refills the bucket and takes them only if there are enough. It runs
in the enqueue's transaction, so it commits, or rolls back, with the job.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from django_jobqueue import validation
from django_jobqueue.models import KindLimit, Status
from django_jobqueue.store import sql, wakeups
from django_jobqueue.validation import Rate

logger = logging.getLogger("django_jobqueue")

# The NOTIFY payload that tells workers the run-time limits changed (a queue name would
# wake only the workers of that queue; this wakes every worker and has it re-read them).
LIMITS_CHANGED = "django_jobqueue:limits"

# The per-key limits a kind may set, each as a task option of the same name.
PER_KEY = ("max_in_flight_per_key", "rate_limit_per_key", "ordered", "fair")

# The advisory locks of max_in_flight: the two-key form, its first key naming ours (the
# one-key space is apart from it, so a project's own one-key locks never collide).
LOCK_SPACE = zlib.crc32(b"django_jobqueue.max_in_flight") - 2**31
# The locks of a limit per key on PostgreSQL: one per kind and key (migration 0018).
KEY_LOCK_SPACE = zlib.crc32(b"django_jobqueue.max_in_flight_per_key") - 2**31


def lock_key(kind: str) -> int:
    """The second advisory-lock key of ``kind`` (a signed 32-bit CRC of its name; two kinds
    sharing one only ever wait for each other, never miscount)."""
    return zlib.crc32(kind.encode("utf-8")) - 2**31


# --- run-time overrides ---------------------------------------------------------------------


@dataclass(frozen=True)
class Override:
    """A kind's limits as set at run time. ``sets_*`` False: that limit is not set here
    (the settings or the task decide); True with the value None: no limit."""

    kind: str
    sets_max_in_flight: bool
    max_in_flight: int | None
    sets_rate_limit: bool
    rate_limit: Rate | None
    changed_at: datetime
    changed_by: str
    # The per-key limits set here (``PER_KEY`` names; None lifts one).
    per_key: dict[str, Any] = field(default_factory=dict)


def overrides() -> dict[str, Override]:
    """Every kind's run-time limits, by kind (one read of a small table)."""
    found: dict[str, Override] = {}
    for row in KindLimit.objects.using(sql.alias()).order_by("kind"):
        found[row.kind] = _override(row)
    return found


def _override(row: KindLimit) -> Override:
    rate: Rate | None = None
    sets_rate = row.sets_rate_limit
    if sets_rate and row.rate_limit:
        try:
            rate = validation.rate(row.rate_limit, name="rate_limit", error=ValueError)
        except ValueError as exc:
            # Written by hand into the table: ignored (said once per read), not fatal.
            logger.warning("kind limit of %s: %s; ignored", row.kind, exc)
            sets_rate = False
    per_key = row.per_key if isinstance(row.per_key, dict) else {}
    return Override(
        per_key={k: v for k, v in per_key.items() if k in PER_KEY},
        kind=row.kind,
        sets_max_in_flight=row.sets_max_in_flight,
        max_in_flight=row.max_in_flight if row.sets_max_in_flight else None,
        sets_rate_limit=sets_rate,
        rate_limit=rate,
        changed_at=row.changed_at,
        changed_by=row.changed_by,
    )


def set_limit(*, kind: str, changes: dict[str, Any], actor: str = "") -> Override:
    """Set a kind's run-time limits: ``changes`` maps ``"max_in_flight"`` (int or None),
    ``"rate_limit"`` (a Rate or None) and the ``PER_KEY`` names (``rate_limit_per_key`` a
    Rate, ``ordered`` and ``fair`` booleans) to the new value, None lifting the limit;
    a limit not in ``changes`` stays as it was. Workers are told on PostgreSQL."""
    alias = sql.alias()
    with transaction.atomic(using=alias):
        # Locked (where the database has row locks) so two changes of one kind serialise.
        row, _ = KindLimit.objects.using(alias).select_for_update().get_or_create(kind=kind)
        if "max_in_flight" in changes:
            row.sets_max_in_flight = True
            row.max_in_flight = changes["max_in_flight"]
        if "rate_limit" in changes:
            row.sets_rate_limit = True
            row.rate_limit = "" if changes["rate_limit"] is None else str(changes["rate_limit"])
        per_key = dict(row.per_key) if isinstance(row.per_key, dict) else {}
        for name in PER_KEY:
            if name in changes:
                value = changes[name]
                per_key[name] = (
                    value if value is None or not isinstance(value, Rate) else str(value)
                )
        row.per_key = per_key
        row.changed_at = timezone.now()
        row.changed_by = actor
        row.save(using=alias)
        wakeups.notify(alias, LIMITS_CHANGED)
    return _override(row)


def clear_limit(*, kind: str) -> bool:
    """Remove a kind's run-time limits (the settings and the task decide again); True if
    it had any."""
    alias = sql.alias()
    with transaction.atomic(using=alias):
        deleted, _ = KindLimit.objects.using(alias).filter(kind=kind).delete()
        wakeups.notify(alias, LIMITS_CHANGED)
    return deleted > 0


def in_flight(*, kinds: Iterable[str]) -> dict[str, int]:
    """How many jobs of each of ``kinds`` are claimed now (kinds with none left out)."""
    rows = (
        sql.jobs()
        .filter(status=Status.CLAIMED, kind__in=list(kinds))
        .values("kind")
        .annotate(n=Count("*"))
        .order_by("kind")
    )
    return {row["kind"]: row["n"] for row in rows}


# --- the enqueue rate -----------------------------------------------------------------------


def take_tokens(*, kind: str, rate: Rate, count: int) -> float | None:
    """Take ``count`` tokens from ``kind``'s bucket, in the current transaction: None if
    they were taken, else the seconds until they will be there (``inf``: never, the
    count being over the bucket's size). Nothing is written when they are not taken.

    On PostgreSQL the bucket's row stays locked until the transaction ends: the
    enqueues of one rate-limited kind inside long transactions wait for each other.
    """
    if count > rate.count:
        return float("inf")
    return sql.dialect().take_tokens(
        kind=kind, capacity=rate.count, refill=rate.refill, count=count
    )


__all__ = [
    "KEY_LOCK_SPACE",
    "LIMITS_CHANGED",
    "LOCK_SPACE",
    "PER_KEY",
    "Override",
    "clear_limit",
    "in_flight",
    "lock_key",
    "overrides",
    "set_limit",
    "take_tokens",
]
