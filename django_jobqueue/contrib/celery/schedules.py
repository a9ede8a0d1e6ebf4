"""Celery's beat schedules (``crontab``, ``schedule``, a ``timedelta`` or a number of
seconds) as the cron expressions our periodic schedules run on.

Celery's interval schedules count from the last run; a cron expression ticks on the
clock. An interval maps when it divides a minute, an hour or a day evenly (every 10 s,
every 15 minutes, every 6 hours, daily): the ticks are then the same, aligned to the
clock. Any other interval is refused, naming it and the alternative (a ``crontab``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django_jobqueue.contrib.celery.exceptions import Unsupported

CRONTAB_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


def _field(value: Any, name: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(_field(v, name) for v in sorted(value))
    if isinstance(value, str) and value.strip():
        return "".join(value.split())
    raise Unsupported(
        f"crontab {name}={value!r}: give a cron field as Celery does (an int, a string "
        "such as '*/15', '1-5' or 'mon-fri', or a set of ints)",
        option=name,
    )


class crontab:
    """``crontab(minute=..., hour=..., day_of_week=..., day_of_month=...,
    month_of_year=...)``, as Celery writes it (each field ``"*"`` by default)."""

    def __init__(
        self,
        minute: Any = "*",
        hour: Any = "*",
        day_of_week: Any = "*",
        day_of_month: Any = "*",
        month_of_year: Any = "*",
        **unsupported: Any,
    ) -> None:
        if unsupported:
            name = sorted(unsupported)[0]
            raise Unsupported(
                f"crontab({name}=...) is not supported: the schedule's time zone is the "
                "project's TIME_ZONE, or periodic(..., timezone=...)",
                option=name,
            )
        values = {
            "minute": minute,
            "hour": hour,
            "day_of_month": day_of_month,
            "month_of_year": month_of_year,
            "day_of_week": day_of_week,
        }
        self.expression = " ".join(_field(values[name], name) for name in CRONTAB_FIELDS)

    def __repr__(self) -> str:
        return f"<crontab: {self.expression}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, crontab) and other.expression == self.expression

    def __hash__(self) -> int:
        return hash(self.expression)


class schedule:
    """``schedule(run_every=timedelta(...))``: an interval (see the module on which)."""

    def __init__(self, run_every: timedelta | float, **unsupported: Any) -> None:
        if unsupported:
            name = sorted(unsupported)[0]
            raise Unsupported(f"schedule({name}=...) is not supported", option=name)
        self.run_every = run_every

    def __repr__(self) -> str:
        return f"<freq: {self.run_every}>"


def cron_of(value: Any, *, entry: str = "schedule") -> str:
    """The cron expression of a beat entry's ``schedule``; ``Unsupported`` (naming the
    entry and the interval) for what no cron expression ticks at."""
    if isinstance(value, crontab):
        return value.expression
    if isinstance(value, schedule):
        value = value.run_every
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise Unsupported(
            f"beat entry {entry!r}: schedule {value!r} is neither a crontab(), a "
            "schedule(), a timedelta nor a number of seconds",
            option="schedule",
        )
    whole = int(seconds)
    if whole == seconds and whole > 0:
        if whole < 60 and 60 % whole == 0:
            return "* * * * * " + ("*" if whole == 1 else f"*/{whole}")
        minutes, rest = divmod(whole, 60)
        if not rest and minutes < 60 and 60 % minutes == 0:
            return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"
        hours, rest = divmod(whole, 3600)
        if not rest and hours < 24 and 24 % hours == 0:
            return "0 * * * *" if hours == 1 else f"0 */{hours} * * *"
        if whole == 86400:
            return "0 0 * * *"
    raise Unsupported(
        f"beat entry {entry!r}: every {seconds:g} s does not divide a minute, an hour or a "
        "day, so no cron expression ticks at it (our schedules tick on the clock, not "
        "from the last run); write it as a crontab(...) instead",
        option="schedule",
    )
