"""Argument types shared by the management commands; each error names what is wrong.

The checks themselves are :mod:`django_jobqueue.validation`'s, so a command line is
held to the same rules as the settings (argparse names the option in its message).
"""

from __future__ import annotations

import math
import os
import uuid
from argparse import ArgumentTypeError
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from django_jobqueue import validation

# The largest whole number every database's integer columns hold (a signed 32-bit
# integer): a count, a limit or a concurrency beyond it is a typing slip, and would be a
# DataError from the database rather than a usage error naming the option.
MAX_INT = 2**31 - 1
# The longest duration or age a command takes: a cutoff that far back is still a time
# every database holds (MySQL's DATETIME starts at year 1000), where a longer one made
# ``now - duration`` an OverflowError. A hundred years is "ever" for a job queue.
MAX_DURATION = timedelta(days=36500)
# The most jobs a worker process runs at once: a thread each, started up front, and
# beyond this many the process may not get them (it aborted at 100,000).
MAX_CONCURRENCY = 10_000


def positive_int(text: str) -> int:
    """A whole number from 1 to ``MAX_INT``."""
    try:
        value = int(text)
    except ValueError:  # not a number, or more digits than Python converts
        raise ArgumentTypeError(f"expected a whole number, got {_short(text)}") from None
    value = validation.positive_int(value, name="", error=ArgumentTypeError)
    if value > MAX_INT:
        raise ArgumentTypeError(f"must be at most {MAX_INT}, got {_short(text)}")
    return value


def concurrency(text: str) -> int:
    """A ``--concurrency``: a whole number from 1 to ``MAX_CONCURRENCY``."""
    value = positive_int(text)
    if value > MAX_CONCURRENCY:
        raise ArgumentTypeError(
            f"must be at most {MAX_CONCURRENCY} (a thread per job in flight; run more"
            f" worker processes for more), got {_short(text)}"
        )
    return value


# The most worker processes one runworker supervises: each is a whole interpreter with
# its own connections; beyond this many it is a typing slip.
MAX_PROCESSES = 256


def processes(text: str) -> int:
    """A ``--processes``: ``auto`` (one per CPU) or a whole number from 1 to MAX_PROCESSES."""
    if text == "auto":
        return max(1, os.cpu_count() or 1)
    value = positive_int(text)
    if value > MAX_PROCESSES:
        raise ArgumentTypeError(f"must be at most {MAX_PROCESSES} or auto, got {_short(text)}")
    return value


# The most async runs a worker process awaits at once: no thread each, but memory and
# connections to whatever they await.
MAX_ASYNC_CONCURRENCY = 100_000


def async_concurrency(text: str) -> int:
    """An ``--async-concurrency``: a whole number from 1 to ``MAX_ASYNC_CONCURRENCY``."""
    value = positive_int(text)
    if value > MAX_ASYNC_CONCURRENCY:
        raise ArgumentTypeError(f"must be at most {MAX_ASYNC_CONCURRENCY}, got {_short(text)}")
    return value


def _short(text: str) -> str:
    """``text`` quoted for an error message, cut short when it is long."""
    return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} characters)"


def name(what: str, max_length: int) -> Callable[[str], str]:
    """An argument type for a kind or queue name: not empty, at most ``max_length``
    characters, valid Unicode without NUL (a command line that is not valid UTF-8
    arrives with lone surrogates), so that it reaches the database as the text it is."""

    def parse(text: str) -> str:
        if not text:
            raise ArgumentTypeError(f"a {what} name cannot be empty")
        if len(text) > max_length:
            raise ArgumentTypeError(
                f"a {what} name is at most {max_length} characters, got {_short(text)}"
            )
        return plain_text(text)

    parse.__name__ = f"{what} name"  # argparse names the type in some of its errors
    return parse


def plain_text(text: str) -> str:
    """Any text the database can compare: no NUL, no lone surrogate (invalid UTF-8)."""
    problem = validation.text_problem(text)
    if problem is not None:
        raise ArgumentTypeError(f"{problem}: {_short(text)}")
    return text


kind_name = name("kind", 200)
queue_name = name("queue", 100)


def seconds(text: str) -> float:
    """A non-negative number of seconds."""
    return _seconds(text, allow_zero=True)


def positive_seconds(text: str) -> float:
    """A number of seconds above zero (a poll interval of 0 would spin on the database)."""
    return _seconds(text, allow_zero=False)


def _seconds(text: str, *, allow_zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected seconds, got {_short(text)}") from None
    delta = validation.duration(value, name="", error=ArgumentTypeError, allow_zero=allow_zero)
    return _bounded(delta, text).total_seconds()


def _bounded(delta: timedelta, text: str) -> timedelta:
    if delta > MAX_DURATION:
        raise _too_long(text)
    return delta


def _too_long(text: str) -> ArgumentTypeError:
    return ArgumentTypeError(
        f"must be at most {MAX_DURATION.days}d ({MAX_DURATION.total_seconds():.0f} seconds), "
        f"got {_short(text)}"
    )


# One duration format for the command line and the settings (``LEASE: "5m"``).
UNITS = validation.UNITS
_DURATION = validation.DURATION_PART
_DURATION_FULL = validation.DURATION_TEXT


def parse_duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``45s``, ``2w`` or a sum of them such as ``1h30m``."""
    spec = text.strip().lower()
    if not _DURATION_FULL.fullmatch(spec):
        raise ArgumentTypeError(
            f"expected a duration such as 7d, 12h, 30m, 45s or 2w, got {_short(text)}"
        )
    try:
        seconds: float = sum(int(n) * UNITS[unit] for n, unit in _DURATION.findall(spec))
    except ValueError:  # more digits than Python converts: far beyond the bound anyway
        seconds = math.inf
    if seconds <= 0:
        raise ArgumentTypeError(f"the duration must be more than zero, got {_short(text)}")
    if seconds > MAX_DURATION.total_seconds():
        raise _too_long(text)
    return timedelta(seconds=seconds)


def parse_age(text: str) -> timedelta:
    """A number of seconds (``90``, ``2.5``) or a duration such as ``5m`` or ``1h30m``."""
    try:
        seconds = float(text)
    except ValueError:
        return parse_duration(text)
    if not seconds > 0 or seconds == math.inf:
        raise ArgumentTypeError(f"expected a number of seconds above zero, got {_short(text)}")
    if seconds > MAX_DURATION.total_seconds():
        raise _too_long(text)
    return timedelta(seconds=seconds)


def parse_moment(text: str) -> datetime:
    """An ISO date or datetime (naive means the current time zone), or a duration ago."""
    if _DURATION_FULL.fullmatch(text.strip().lower()):
        return timezone.now() - parse_duration(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ArgumentTypeError(
            f"expected an ISO date/datetime (2025-01-31T12:00) or a time ago (7d, 12h, 30m), "
            f"got {text!r}"
        ) from None
    try:
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment)
        moment.astimezone(UTC)  # how every database is handed it
    except (OverflowError, ValueError):
        raise ArgumentTypeError(f"{_short(text)} is outside the years 1 to 9999 in UTC") from None
    return moment


def parse_job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise ArgumentTypeError(f"{_short(text)} is not a job id (expected a UUID)") from None


NO_LIMIT = ("none", "off", "unlimited")


def limit_count(text: str) -> int | None:
    """A ``--max-in-flight``: a whole number from 1 to ``MAX_INT``, or ``none`` (no limit)."""
    if text.strip().lower() in NO_LIMIT:
        return None
    try:
        return positive_int(text)
    except ArgumentTypeError as exc:
        if str(exc).startswith("must be at most"):
            raise
        raise ArgumentTypeError(
            f"expected a whole number of at least 1, or none (no limit), got {_short(text)}"
        ) from None


def limit_flag(text: str) -> bool | None:
    """An ``--ordered`` or ``--fair``: ``on``/``off``, or ``none`` (not set here)."""
    word = text.strip().lower()
    if word in ("on", "yes", "true"):
        return True
    if word in ("off", "no", "false"):
        return False
    if word == "none":
        return None
    raise ArgumentTypeError(f"expected on, off or none, got {_short(text)}")


def limit_rate(text: str) -> validation.Rate | None:
    """A ``--rate-limit``: ``100/s``, ``30/m``, ``500/h``, or ``none`` (no limit)."""
    if text.strip().lower() in NO_LIMIT:
        return None
    rate = validation.rate(text, name="", error=ArgumentTypeError)
    if rate.count > MAX_INT:
        raise ArgumentTypeError(f"must allow at most {MAX_INT} at a time, got {_short(text)}")
    return rate
