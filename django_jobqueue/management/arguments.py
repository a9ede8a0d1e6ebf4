"""Argument types shared by the management commands; each error names what is wrong.

The checks themselves are :mod:`django_jobqueue.validation`'s, so a command line is
held to the same rules as the settings (argparse names the option in its message).
"""

from __future__ import annotations

import re
import uuid
from argparse import ArgumentTypeError
from datetime import datetime, timedelta

from django.utils import timezone

from django_jobqueue import validation


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    return validation.positive_int(value, name="", error=ArgumentTypeError)


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
        raise ArgumentTypeError(f"expected seconds, got {text!r}") from None
    delta = validation.duration(value, name="", error=ArgumentTypeError, allow_zero=allow_zero)
    return delta.total_seconds()


UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(\d+)([wdhms])")
_DURATION_FULL = re.compile(r"(?:\d+[wdhms])+")


def parse_duration(text: str) -> timedelta:
    """``7d``, ``12h``, ``30m``, ``45s``, ``2w`` or a sum of them such as ``1h30m``."""
    spec = text.strip().lower()
    if not _DURATION_FULL.fullmatch(spec):
        raise ArgumentTypeError(
            f"expected a duration such as 7d, 12h, 30m, 45s or 2w, got {text!r}"
        )
    seconds = sum(int(n) * UNITS[unit] for n, unit in _DURATION.findall(spec))
    if seconds <= 0:
        raise ArgumentTypeError(f"the duration must be more than zero, got {text!r}")
    return timedelta(seconds=seconds)


def parse_age(text: str) -> timedelta:
    """A number of seconds (``90``, ``2.5``) or a duration such as ``5m`` or ``1h30m``."""
    try:
        seconds = float(text)
    except ValueError:
        return parse_duration(text)
    if not seconds > 0 or seconds == float("inf"):
        raise ArgumentTypeError(f"expected a number of seconds above zero, got {text!r}")
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
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    return moment


def parse_job_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        raise ArgumentTypeError(f"{text!r} is not a job id (expected a UUID)") from None


NO_LIMIT = ("none", "off", "unlimited")


def limit_count(text: str) -> int | None:
    """A ``--max-in-flight``: a whole number of at least 1, or ``none`` (no limit)."""
    if text.strip().lower() in NO_LIMIT:
        return None
    try:
        return positive_int(text)
    except ArgumentTypeError:
        raise ArgumentTypeError(
            f"expected a whole number of at least 1, or none (no limit), got {text!r}"
        ) from None


def limit_rate(text: str) -> validation.Rate | None:
    """A ``--rate-limit``: ``100/s``, ``30/m``, ``500/h``, or ``none`` (no limit)."""
    if text.strip().lower() in NO_LIMIT:
        return None
    return validation.rate(text, name="", error=ArgumentTypeError)
