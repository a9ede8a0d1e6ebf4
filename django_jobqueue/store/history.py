"""The run history: per-minute counts and duration histograms per kind and outcome,
sampled from the run tally, kept for HISTORY_DAYS; and the deploy markers drawn over
them.

Why sampled, not written by the settlement: every settlement already adds its runs to
the tally (``store.monitoring``) in its guarded write; a second upsert there, keyed by
the minute, would be paid by every settlement of the hot path. Instead a maintenance
service (``sample_history``, every few seconds on each worker, one at a time by a
compare-and-set on the cursor's clock row) reads the tally's totals, subtracts the
totals it read last time, and adds the difference to the current minute. A run is
counted exactly once (the totals only grow, and the cursor moves with the minute rows
in one transaction) and lands in the minute of the first sample after its settlement
committed: a few seconds late at most, never lost.

Why percentiles from buckets: the tally keeps a fixed histogram per kind and outcome
(``DURATION_BUCKETS``, cumulative counts at 16 bounds from 5 ms to 1 h), so a minute's
row keeps the same 16 counts. Any window's histogram is the sum of its minutes' rows
(counts add; exact percentiles would not), and a percentile is read from it by linear
interpolation within the bucket that holds it (``bucket_percentile``), as Prometheus's
``histogram_quantile`` does. The price is resolution: a value is placed within its
bucket's bounds (e.g. between 1 s and 2.5 s), which is what an operator needs to see a
slowdown, and it costs a few integers per row instead of a sample per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Sum
from django.db.models.functions import TruncHour

from django_jobqueue.errors import InvalidFilter, InvalidMarker
from django_jobqueue.models import DeployMarker, RunHistoryCursor, RunMinute, RunTally
from django_jobqueue.models.runtime import TallyCounts
from django_jobqueue.states import Outcome
from django_jobqueue.store import sql
from django_jobqueue.store.monitoring import DURATION_BUCKETS, TALLY_BUCKETS
from django_jobqueue.store.snapshot import KindRuns

COUNTS: tuple[str, ...] = ("runs", "timed", "microseconds", *TALLY_BUCKETS)
# How the chart stacks the outcomes: each journal outcome of a run, in one group.
GROUPS: dict[str, str] = {
    Outcome.COMPLETED: "completed",
    Outcome.RETRIED: "retried",
    Outcome.STALE_RECOVERED: "retried",
    Outcome.DEAD: "dead",
}
# The outcomes whose durations the percentiles are of: runs that did the work to its
# end, well or badly (a pause, a release or a cancel cuts a run short).
TIMED_OUTCOMES = tuple(GROUPS)
LABEL_MAX = DeployMarker._meta.get_field("label").max_length or 200
BY_MAX = DeployMarker._meta.get_field("by").max_length or 255
_CLOCK = {"kind": "", "outcome": ""}
_MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _minute(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _counts(row: TallyCounts | dict[str, Any]) -> tuple[int, ...]:
    if isinstance(row, dict):
        return tuple(int(row[c] or 0) for c in COUNTS)
    return tuple(int(getattr(row, c)) for c in COUNTS)


def sample_history(*, now: datetime, min_gap: timedelta) -> int | None:
    """Add the runs the tally gained since the last sample to ``now``'s minute; the
    number of (kind, outcome) rows that gained some, or None when another sampler ran
    within ``min_gap`` (nothing done). The first sample ever only sets the cursor: the
    tally's past is not put into one minute."""
    alias = sql.alias()
    cursors = RunHistoryCursor.objects.using(alias)
    with transaction.atomic(using=alias):
        # The UPDATE takes the clock row's lock: a second sampler waits here, then finds
        # the clock moved and does nothing.
        first = 0
        if not cursors.filter(**_CLOCK, sampled_at__lte=now - min_gap).update(sampled_at=now):
            if cursors.filter(**_CLOCK).exists():
                return None  # sampled within min_gap
            # No clock yet: the first sample ever, of one sampler however many race here
            # (on MySQL/MariaDB two may deadlock once: one loses a turn, as on any
            # deadlock). Inserted only when missing: an INSERT IGNORE of a row that is
            # there share-locks it, and two such samplers then deadlock on the UPDATE.
            cursors.bulk_create([RunHistoryCursor(**_CLOCK)], ignore_conflicts=True)
            first = cursors.filter(**_CLOCK, sampled_at=None).update(sampled_at=now)
            if not first:
                return None
        totals = {
            (r["kind"], r["outcome"]): _counts(r)
            for r in RunTally.objects.using(alias)
            .values("kind", "outcome")
            .annotate(**{c: Sum(c) for c in COUNTS})
            .values("kind", "outcome", *COUNTS)
        }
        seen = {(c.kind, c.outcome): c for c in cursors.exclude(kind="")}
        gained: dict[tuple[str, str], tuple[int, ...]] = {}
        for key, now_counts in totals.items():
            before = _counts(seen[key]) if key in seen else (0,) * len(COUNTS)
            delta = tuple(a - b for a, b in zip(now_counts, before, strict=True))
            if any(d < 0 for d in delta):  # the tally was emptied since: count afresh
                delta = now_counts
            if any(delta):
                gained[key] = delta
        _move_cursor(alias, seen, totals)
        if not first:
            _add_minute(alias, _minute(now), gained)
        return 0 if first else len(gained)


def _move_cursor(
    alias: str,
    seen: dict[tuple[str, str], RunHistoryCursor],
    totals: dict[tuple[str, str], tuple[int, ...]],
) -> None:
    changed: list[RunHistoryCursor] = []
    new: list[RunHistoryCursor] = []
    for (kind, outcome), counts in totals.items():
        row = seen.get((kind, outcome)) or RunHistoryCursor(kind=kind, outcome=outcome)
        if _counts(row) == counts:
            continue
        for name, value in zip(COUNTS, counts, strict=True):
            setattr(row, name, value)
        (changed if row.pk else new).append(row)
    cursors = RunHistoryCursor.objects.using(alias)
    cursors.bulk_create(new)
    if changed:
        cursors.bulk_update(changed, list(COUNTS))


def _add_minute(
    alias: str, minute: datetime, gained: dict[tuple[str, str], tuple[int, ...]]
) -> None:
    if not gained:
        return
    minutes = RunMinute.objects.using(alias)
    there = {(r.kind, r.outcome): r for r in minutes.filter(minute=minute)}
    changed: list[RunMinute] = []
    new: list[RunMinute] = []
    for (kind, outcome), delta in gained.items():
        row = there.get((kind, outcome))
        if row is None:
            new.append(
                RunMinute(
                    minute=minute,
                    kind=kind,
                    outcome=outcome,
                    **dict(zip(COUNTS, delta, strict=True)),
                )
            )
            continue
        for name, value in zip(COUNTS, delta, strict=True):
            setattr(row, name, getattr(row, name) + value)
        changed.append(row)
    minutes.bulk_create(new)
    if changed:
        minutes.bulk_update(changed, list(COUNTS))


def prune_history(*, before: datetime) -> int:
    """Delete the minutes and the deploy markers older than ``before``; how many rows."""
    alias = sql.alias()
    gone, _ = RunMinute.objects.using(alias).filter(minute__lt=before).delete()
    marks, _ = DeployMarker.objects.using(alias).filter(at__lt=before).delete()
    return gone + marks


def bucket_percentile(buckets: Sequence[int], timed: int, q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``timed`` durations from their cumulative bucket
    counts (per bound of DURATION_BUCKETS), interpolated linearly within the bucket that
    holds it (from 0 below the first bound); the last bound when it lies beyond it.
    None when nothing was timed."""
    if timed <= 0:
        return None
    target = q * timed
    low_bound, low_count = 0.0, 0
    for bound, count in zip(DURATION_BUCKETS, buckets, strict=True):
        if count >= target and count > low_count:
            return low_bound + (bound - low_bound) * (target - low_count) / (count - low_count)
        low_bound, low_count = bound, count
    return DURATION_BUCKETS[-1]


@dataclass
class Slot:
    """The runs of one slot of time (``at``: its start): counts per outcome group, and
    the timed runs' histogram."""

    at: datetime
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("completed", "retried", "dead"), 0)
    )
    timed: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(TALLY_BUCKETS))

    def add(self, outcome: str, counts: tuple[int, ...]) -> None:
        self.counts[GROUPS[outcome]] += counts[0]
        self.timed += counts[1]
        for i, n in enumerate(counts[3:]):
            self.buckets[i] += n

    def percentile(self, q: float) -> float | None:
        return bucket_percentile(self.buckets, self.timed, q)


@dataclass(frozen=True)
class History:
    """A window of the history: its slots (oldest first, every slot present), the same
    totals per kind, and the deploy markers within it."""

    since: datetime
    step: timedelta
    slots: list[Slot]
    kinds: dict[str, Slot]
    markers: list[DeployMarker]


def read_history(
    *, since: datetime, until: datetime, step: timedelta, kinds: Sequence[str] | None = None
) -> History:
    """The history from ``since`` to ``until`` in slots of ``step`` (whole minutes; the
    slots start on multiples of it), of ``kinds`` when given, with each kind's totals;
    and the markers set within the window. Summed in the database: by minute, or by
    hour when the step is whole hours (7 days of a busy queue are a few hundred rows
    read, not a row per kind and outcome and minute)."""
    if step < _MINUTE or step % _MINUTE:
        raise InvalidFilter(f"step must be whole minutes, got {step}", argument="step")
    if until <= since:
        raise InvalidFilter("until must be after since", argument="until")
    alias = sql.alias()
    start = _EPOCH + (since - _EPOCH) // step * step
    slots = [Slot(at=start + i * step) for i in range(int((until - start) / step) + 1)]
    rows = RunMinute.objects.using(alias).filter(
        minute__gte=start, minute__lte=until, outcome__in=TIMED_OUTCOMES
    )
    if kinds is not None:
        rows = rows.filter(kind__in=list(kinds))
    sums = {c: Sum(c) for c in COUNTS}
    hourly = step % timedelta(hours=1) == timedelta(0)
    at = TruncHour("minute", tzinfo=UTC) if hourly else F("minute")
    by_time: Any = rows.annotate(at=at).values("at", "outcome").annotate(**sums)
    for row in by_time.order_by("at"):
        slot = min(max(int((row["at"] - start) / step), 0), len(slots) - 1)
        slots[slot].add(row["outcome"], _counts(row))
    per_kind: dict[str, Slot] = {}
    by_kind: Any = rows.values("kind", "outcome").annotate(**sums)
    for row in by_kind.order_by("kind"):
        per_kind.setdefault(row["kind"], Slot(at=start)).add(row["outcome"], _counts(row))
    markers = list(
        DeployMarker.objects.using(alias).filter(at__gte=start, at__lte=until).order_by("at")
    )
    return History(since=start, step=step, slots=slots, kinds=per_kind, markers=markers)


def kind_runs(
    *, since: datetime, until: datetime, outcomes: Sequence[str], failed: Sequence[str]
) -> dict[str, KindRuns]:
    """Per kind, the runs of ``outcomes`` counted in the history from ``since`` to
    ``until`` (whole minutes), by outcome, with p50/p95 seconds from the buckets of the
    timed outcomes and the share of ``failed`` ones: ``run_stats`` read from a few rows
    per kind and minute instead of every journal entry of the window (a day of a busy
    queue's journal made the dashboard take seconds)."""
    rows: Any = (
        RunMinute.objects.using(sql.alias())
        .filter(minute__gte=_minute(since), minute__lte=until, outcome__in=list(outcomes))
        .values("kind", "outcome")
        .annotate(**{c: Sum(c) for c in COUNTS})
    )
    counts: dict[str, dict[str, int]] = {}
    timed: dict[str, Slot] = {}
    for row in rows.order_by("kind"):
        counts.setdefault(row["kind"], {})[row["outcome"]] = int(row["runs"])
        if row["outcome"] in GROUPS:
            timed.setdefault(row["kind"], Slot(at=since)).add(row["outcome"], _counts(row))
    result = {}
    for kind, by_outcome in counts.items():
        runs = sum(by_outcome.values())
        if not runs:
            continue
        histogram = timed.get(kind)
        result[kind] = KindRuns(
            runs=runs,
            outcomes=by_outcome,
            p50=histogram.percentile(0.5) if histogram else None,
            p95=histogram.percentile(0.95) if histogram else None,
            failure_rate=sum(by_outcome.get(o, 0) for o in failed) / runs,
        )
    return result


def add_marker(*, label: str, by: str, at: datetime) -> DeployMarker:
    """Record a deploy marker; a label that is empty or too long, or an author too
    long, is refused (InvalidMarker) and nothing is written."""
    if not isinstance(label, str) or not label.strip():
        raise InvalidMarker("A marker needs a label, such as 'deploy 1.4.2'", argument="label")
    if len(label.strip()) > LABEL_MAX:
        raise InvalidMarker(
            f"A marker's label is at most {LABEL_MAX} characters, got {len(label.strip())}",
            argument="label",
        )
    if not isinstance(by, str) or len(by) > BY_MAX:
        raise InvalidMarker(
            f"A marker's author is a string of at most {BY_MAX} characters", argument="by"
        )
    return DeployMarker.objects.using(sql.alias()).create(label=label.strip(), by=by, at=at)
