"""Cron schedules: an expression parsed by croniter, read in a time zone, and which of
its ticks are due at a given moment.

Pure: no Django settings, no database. Every moment going in and out is a
timezone-aware datetime; ticks come out in UTC.

croniter (with dateutil and six, 0.6 MiB of a process and 6 ms of its start) is
imported when a cron expression is first parsed or stepped, not with this module: the
settings and the task API import it in every process, most of which have no schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from croniter import croniter

# A tick a worker sees no later than this after its time is run on time; one nobody
# saw by then was missed (skipped, or caught up with catch_up=True).
GRACE = timedelta(seconds=10)

# The most on-time ticks one look enqueues (a seconds schedule seen GRACE late).
MAX_TICKS = 100

ErrorFactory = Callable[[str], Exception]


def zone(value: str | tzinfo, *, name: str, error: ErrorFactory) -> tzinfo:
    """A time zone: an IANA name (``"Europe/Paris"``, ``"UTC"``) or a tzinfo."""
    if isinstance(value, tzinfo):
        return value
    if not isinstance(value, str) or not value:
        raise error(f"{name} must be a time zone name such as 'Europe/Paris', got {value!r}")
    try:
        return ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise error(f"{name}: unknown time zone {value!r}") from None


def zone_name(tz: tzinfo) -> str:
    return str(getattr(tz, "key", None) or tz.tzname(None) or tz)


@dataclass(frozen=True)
class Cron:
    """A cron expression read in a time zone.

    Five fields (minute hour day month weekday), or six with a trailing seconds field
    (croniter's order), or the ``@hourly``-style aliases croniter knows.
    """

    expression: str
    tz: tzinfo = field(default=UTC)

    @classmethod
    def parse(cls, expression: object, *, tz: tzinfo = UTC, name: str, error: ErrorFactory) -> Cron:
        """Check ``expression``; the error names ``name`` and what is wrong."""
        if not isinstance(expression, str) or not expression.strip():
            raise error(
                f"{name} must be a cron expression such as '*/5 * * * *', got {expression!r}"
            )
        from croniter import CroniterBadDateError, CroniterError, croniter

        text = " ".join(expression.split())
        try:
            probe = croniter(text, datetime(2000, 1, 1, tzinfo=tz))
            probe.get_next(datetime)
        except CroniterBadDateError:
            raise error(f"{name}: {text!r} never matches a date") from None
        except CroniterError as exc:
            raise error(f"{name}: {text!r} is not a valid cron expression ({exc})") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise error(f"{name}: {text!r} is not a valid cron expression ({exc})") from None
        return cls(text, tz)

    def _iter(self, start: datetime) -> croniter:
        from croniter import croniter

        return croniter(self.expression, start.astimezone(self.tz))

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after ``moment``, in UTC."""
        tick: datetime = self._iter(moment).get_next(datetime)
        return tick.astimezone(UTC)

    def latest(self, at_or_before: datetime) -> datetime:
        """The last tick at or before ``at_or_before``, in UTC."""
        # croniter's get_prev is strictly before its start; a microsecond on makes it
        # include a tick that falls exactly on ``at_or_before``.
        tick: datetime = self._iter(at_or_before + timedelta(microseconds=1)).get_prev(datetime)
        return tick.astimezone(UTC)

    def ticks(self, *, after: datetime, until: datetime, limit: int = MAX_TICKS) -> list[datetime]:
        """Ticks in ``(after, until]``, oldest first, in UTC; at most ``limit`` (the latest)."""
        found: list[datetime] = []
        it = self._iter(after)
        while True:
            tick = it.get_next(datetime).astimezone(UTC)
            if tick > until:
                return found[-limit:]
            found.append(tick)


def due_ticks(
    cron: Cron,
    *,
    now: datetime,
    last_tick: datetime | None,
    since: datetime,
    catch_up: bool,
    grace: timedelta = GRACE,
) -> list[datetime]:
    """The ticks to enqueue at ``now``, oldest first.

    Every tick after ``last_tick`` (the last one enqueued) that is at most ``grace``
    old is on time. An older one was missed while no worker ran: skipped, unless
    ``catch_up``, in which case the latest missed tick is enqueued too, provided the
    schedule was already known then (``since``: when a worker first saw it).
    """
    window = now - grace
    lower = window if last_tick is None else max(last_tick, window)
    due = cron.ticks(after=lower, until=now)
    if catch_up:
        missed = cron.latest(window)
        if (last_tick is None or missed > last_tick) and missed >= since:
            due.insert(0, missed)
    return due
