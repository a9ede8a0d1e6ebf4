"""Coercion and validation, written once: durations, positive integers, bounded text and
JSON. Settings, task options, enqueue options, task signals and the management
commands all call these, each with the name of what it checks and the error type its
caller raises (``ConfigurationError`` for a setting, ``InvalidOption`` for an option,
argparse's error for a command line), so every message names its key or option.

Pure: no Django, no database.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, overload

ErrorFactory = Callable[[str], Exception]


def _must(name: str) -> str:
    return f"{name} must" if name else "must"


def duration(value: Any, *, name: str, error: ErrorFactory, allow_zero: bool = True) -> timedelta:
    """Seconds (int or float) or a timedelta, as a timedelta; never negative, and above
    zero unless ``allow_zero``."""
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise error(
            f"{_must(name)} be a number of seconds or a timedelta, not {type(value).__name__}"
        )
    try:
        result = value if isinstance(value, timedelta) else timedelta(seconds=value)
    except (OverflowError, ValueError):  # NaN, infinity, beyond timedelta's range
        raise error(f"{_must(name)} be a finite number of seconds, got {value!r}") from None
    if not allow_zero and result <= timedelta(0):
        raise error(f"{_must(name)} be positive, got {value!r}")
    if result < timedelta(0):
        raise error(f"{_must(name)} not be negative, got {value!r}")
    return result


@overload
def positive_int(value: Any, *, name: str, error: ErrorFactory) -> int: ...


@overload
def positive_int(value: Any, *, name: str, error: ErrorFactory, allow_none: bool) -> int | None: ...


def positive_int(
    value: Any, *, name: str, error: ErrorFactory, allow_none: bool = False
) -> int | None:
    """A whole number of at least 1 (``None`` too when ``allow_none``); bools are refused."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        extra = " or None" if allow_none else ""
        raise error(f"{_must(name)} be a positive integer{extra}, got {value!r}")
    return value


@overload
def bounded_text(value: Any, *, name: str, error: ErrorFactory, max_length: int) -> str: ...


@overload
def bounded_text(
    value: Any, *, name: str, error: ErrorFactory, max_length: int, allow_none: bool
) -> str | None: ...


def bounded_text(
    value: Any, *, name: str, error: ErrorFactory, max_length: int, allow_none: bool = False
) -> str | None:
    """A non-empty string that fits its column (queue names, keys)."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value or len(value) > max_length:
        raise error(
            f"{_must(name)} be a non-empty string of at most {max_length} characters, got {value!r}"
        )
    return value


def dumps(value: Any) -> str:
    """The one JSON encoding of stored values: compact, and no NaN or infinity (which
    PostgreSQL's jsonb refuses). Raises TypeError or ValueError for what it cannot encode."""
    return json.dumps(value, allow_nan=False, separators=(",", ":"))


def json_problem(value: Any) -> str | None:
    """Why ``value`` cannot be stored as JSON (``None`` when it can)."""
    try:
        dumps(value)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None
