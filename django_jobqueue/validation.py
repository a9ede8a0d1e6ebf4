"""Coercion and validation, written once: durations, positive integers, bounded text and
JSON. Settings, task options, enqueue options, task signals and the management
commands all call these, each with the name of what it checks and the error type its
caller raises (``ConfigurationError`` for a setting, ``InvalidOption`` for an option,
argparse's error for a command line), so every message names its key or option.

Pure: no Django, no database.
"""

from __future__ import annotations

import difflib
import inspect
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, overload

from django_jobqueue import jsontext

ErrorFactory = Callable[[str], Exception]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the choice nearest a misspelt ``name``, or ""."""
    near = difflib.get_close_matches(name, sorted(choices), n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def unexpected_keywords(signature: inspect.Signature, kwargs: Iterable[str]) -> str | None:
    """What ``signature.bind`` would not say first: a keyword the function does not take
    (``emial=``) is reported as such, with the parameter it was likely meant for, not
    as the missing ``email``. None when every keyword is taken."""
    params = signature.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    named = [
        n
        for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    for key in kwargs:
        if key not in named:
            return f"got an unexpected keyword argument {key!r}{did_you_mean(key, named)}"
    return None


def _must(name: str) -> str:
    return f"{name} must" if name else "must"


# Durations as text, as the command line takes them: 45s, 30m, 12h, 7d, 2w, or a sum
# such as 1h30m.
UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
DURATION_PART = re.compile(r"(\d+)([wdhms])")
DURATION_TEXT = re.compile(r"(?:\d+[wdhms])+")


def duration_seconds(text: str) -> float | None:
    """The seconds a duration such as ``5m`` or ``1h30m`` stands for; None for text in
    no such form."""
    spec = text.strip().lower()
    if not DURATION_TEXT.fullmatch(spec):
        return None
    try:
        return float(sum(int(n) * UNITS[unit] for n, unit in DURATION_PART.findall(spec)))
    except (ValueError, OverflowError):  # more digits than Python converts
        return math.inf


def duration(value: Any, *, name: str, error: ErrorFactory, allow_zero: bool = True) -> timedelta:
    """Seconds (int or float), a timedelta, or text as the command line takes it
    (``"5m"``, ``"1h30m"``), as a timedelta; never negative, and above zero unless
    ``allow_zero``."""
    if isinstance(value, str):
        seconds = duration_seconds(value)
        if seconds is None:
            raise error(
                f"{_must(name)} be a number of seconds, a timedelta or a duration such as "
                f"'45s', '5m', '12h', '7d' or '1h30m', got {value[:40]!r}"
            )
        value = seconds
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise error(
            f"{_must(name)} be a number of seconds, a timedelta or a duration such as '5m', "
            f"not {type(value).__name__}"
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
    problem = text_problem(value)
    if problem is not None:
        raise error(f"{name or 'the value'} {problem}: {value!r}")
    return value


class Unstorable(ValueError):
    """A value the databases refuse to store, and where in it the problem is."""

    def __init__(self, problem: str, path: str = "") -> None:
        self.problem = problem
        self.path = path  # e.g. "['items'][2]": where in the value; "" for the value itself
        super().__init__(f"{path} {problem}" if path else problem)


def text_problem(text: str) -> str | None:
    """Why PostgreSQL would refuse this text (a NUL, a lone surrogate), or None."""
    if "\x00" in text:
        return "contains a NUL character (\\x00)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


_TEXT_ONLY = {str}  # the keys' types an object may have: ``str`` itself, no subclass

# In JSON text, a NUL or a UTF-16 surrogate escape: only then are the strings looked at.
_SUSPECT = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def dumps(
    value: Any,
    *,
    max_depth: int | None = None,
    own_level: bool = False,
    limit_name: str = "MAX_JSON_DEPTH",
) -> str:
    """The one JSON encoding of stored values: compact, and only what reads back as it
    was written: no NaN or infinity, no key that is not a string (JSON would turn it
    into one), no NUL and no lone surrogate in any string or key (PostgreSQL's jsonb
    refuses both), and with ``max_depth`` no list or object nested deeper than that
    (a deep value every reader would have to recurse through; with ``own_level`` the
    value's own object is not counted, as a payload's or a carry's is not). Tuples are
    written as lists.

    Raises TypeError or ValueError (``Unstorable`` naming the path to the bad part)
    for what it cannot encode. The usual value (flat, plain text) is checked on the
    encoded text alone; only a suspect one is walked: fewer brackets than the depth
    allowed cannot be nested too deeply.
    """
    try:
        text = jsontext.encode(value)
    except RecursionError:
        if max_depth is not None:
            _check_depth(value, max_depth, own_level, limit_name)
        raise Unstorable("is nested too deeply to encode") from None
    opened = text.count("{")
    if max_depth is not None and opened + text.count("[") > max_depth + own_level:
        _check_depth(value, max_depth, own_level, limit_name)
    top = type(value) is dict
    try:
        if opened > top or (top and not {*map(type, value)} <= _TEXT_ONLY) or _SUSPECT.search(text):
            _check(value, "")
    except RecursionError:
        raise Unstorable("is nested too deeply to encode") from None
    return text


def dumps_rows(
    rows: Sequence[Sequence[Any]], *, names: Sequence[str], open_fields: Iterable[str]
) -> str:
    """``dumps`` of rows of the store's own making (each row's ``i``-th value the field
    ``names[i]``, a short row lacking its last ones): only ``open_fields`` (a run's result,
    its carry) are walked, the rest checked on the text. Raises as ``dumps`` does."""
    text = jsontext.encode(rows)
    whole = _SUSPECT.search(text) is not None
    places = [names.index(name) for name in open_fields]
    try:
        for i, row in enumerate(rows):
            for place in range(len(row)) if whole else places:
                if place < len(row) and (whole or isinstance(row[place], dict | list | tuple)):
                    _check(row[place], f"[{i}][{names[place]!r}]")
    except RecursionError:
        raise Unstorable("is nested too deeply to encode") from None
    return text


def _children(value: Any) -> Iterator[tuple[str, Any]]:
    """A list's or an object's items as (path step, item)."""
    if isinstance(value, dict):
        return ((f"[{key!r}]", item) for key, item in value.items())
    return ((f"[{index}]", item) for index, item in enumerate(value))


def too_deep(value: Any, max_depth: int) -> list[str] | None:
    """The path (as steps) to the first list or object nested deeper than ``max_depth``
    (the value itself, if one, is depth 1), or None. Walked with a stack of its own, so
    however deep the value, this never recurses."""
    if not isinstance(value, dict | list | tuple):
        return None
    if max_depth < 1:
        return []
    stack = [_children(value)]
    path: list[str] = []
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            if path:
                path.pop()
            continue
        if isinstance(step[1], dict | list | tuple):
            path.append(step[0])
            if len(stack) >= max_depth:
                return path
            stack.append(_children(step[1]))
    return None


def first_refused(
    value: Any,
    refused: Callable[[Any], bool],
    *,
    containers: tuple[type, ...] = (dict, list, tuple),
) -> tuple[list[str], Any] | None:
    """The path (as steps) to the first part of ``value``, or key in it, that
    ``refused`` says no to, and that part; None if there is none. Mappings and the
    other ``containers`` (never text) are walked with a stack of their own, so a deep
    value never recurses: an encoder's bare "not serializable" becomes a message that
    says where."""
    if refused(value):
        return [], value
    if not _walked(value, containers):
        return None
    stack = [_parts(value)]
    # The containers being walked: a circle (the encoder's words name it) is not re-entered.
    walking = [id(value)]
    path: list[str] = []
    while stack:
        part = next(stack[-1], None)
        if part is None:
            stack.pop()
            walking.pop()
            if path:
                path.pop()
            continue
        label, keys, item = part
        for key in keys:
            if refused(key):
                return [*path, label], key
        if refused(item):
            return [*path, label], item
        if _walked(item, containers) and id(item) not in walking:
            path.append(label)
            stack.append(_parts(item))
            walking.append(id(item))
    return None


def _walked(value: Any, containers: tuple[type, ...]) -> bool:
    return isinstance(value, containers) and not isinstance(value, str | bytes)


def _parts(value: Any) -> Iterator[tuple[str, tuple[Any, ...], Any]]:
    """A mapping's or a sequence's parts as (path step, keys to check, item)."""
    if isinstance(value, Mapping):
        return ((f"[{key!r}]", (key,), item) for key, item in list(value.items()))
    return ((f"[{index}]", (), item) for index, item in enumerate(value))


def not_json(value: Any) -> bool:
    """Whether ``json.dumps`` refuses ``value`` by its type (its parts aside)."""
    return not isinstance(value, str | int | float | bool | dict | list | tuple | None)


def short_path(steps: list[str]) -> str:
    """A path for a message: a long one with its middle left out."""
    if len(steps) <= 8:
        return "".join(steps)
    return "".join(steps[:4]) + "…" + "".join(steps[-2:])


def _check_depth(value: Any, max_depth: int, own_level: bool, limit_name: str) -> None:
    steps = too_deep(value, max_depth + own_level)
    if steps is not None:
        raise Unstorable(
            f"is nested more than {max_depth} levels deep ({limit_name})", short_path(steps)
        )


def _check(value: Any, path: str) -> None:
    """What JSON encoding lets through but would not read back, or the databases refuse."""
    if isinstance(value, str):
        if not value.isascii() or "\x00" in value:
            problem = text_problem(value)
            if problem is not None:
                raise Unstorable(problem, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise Unstorable(f"has a key that is not a string: {key!r}", path)
            if not key.isascii() or "\x00" in key:
                problem = text_problem(key)
                if problem is not None:
                    raise Unstorable(f"has a key that {problem}", path)
            _check(item, f"{path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")


# The deepest JSON any reader decodes, and so the most MAX_JSON_DEPTH may allow: a value
# this deep is still shown (pretty-printed, redacted) and run well within Python's
# recursion limit. Deeper ones exist only if written around the queue (raw SQL, an
# older version).
READ_DEPTH = 200


class Undecodable:
    """A stored JSON value that cannot be read back, in place of it: readers show it as
    such (with ``error``), a worker settles its job dead. Never stored."""

    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error

    def __repr__(self) -> str:
        return f"<undecodable: {self.error}>"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Undecodable) and other.error == self.error

    def __hash__(self) -> int:
        return hash(self.error)


def decode(text: str | bytes) -> Any:
    """A stored JSON value, or ``Undecodable`` saying why it cannot be read: text that
    is not JSON, or nested deeper than ``READ_DEPTH`` (checked, as in ``dumps``, only
    when the text has that many brackets)."""
    try:
        value = json.loads(text)
    except RecursionError:
        return Undecodable(f"nested too deeply to decode (over {READ_DEPTH} levels)")
    except ValueError as exc:  # JSONDecodeError, and bytes that are not UTF-8
        return Undecodable(f"not valid JSON: {exc}")
    if isinstance(text, bytes):
        opened = text.count(b"[") + text.count(b"{")
    else:
        opened = text.count("[") + text.count("{")
    if opened > READ_DEPTH and too_deep(value, READ_DEPTH) is not None:
        return Undecodable(f"nested more than {READ_DEPTH} levels deep")
    return value


def json_problem(
    value: Any,
    *,
    max_depth: int | None = None,
    own_level: bool = False,
    limit_name: str = "MAX_JSON_DEPTH",
) -> str | None:
    """Why ``value`` cannot be stored as JSON (``None`` when it can)."""
    try:
        dumps(value, max_depth=max_depth, own_level=own_level, limit_name=limit_name)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def clean_text(value: Any, limit: int) -> str:
    """Text as it can always be stored: NULs and lone surrogates written as escapes,
    and cut to ``limit`` characters, saying how much was cut. What is not text (a note
    a task gave as something else) is its ``str()``, or a description if that fails."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = str(value)
        except Exception as exc:
            text = f"<a {type(value).__qualname__} whose str() raised {type(exc).__qualname__}>"
    if text_problem(text) is not None:
        text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    if len(text) > limit:
        cut = len(text) - limit
        text = f"{text[:limit]}\n... ({cut} more characters cut)"
    return text


# --- rates ("100/s") -----------------------------------------------------------------------

RATE_UNITS = {"s": 1, "m": 60, "h": 3600}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*([smh])\s*$")


@dataclass(frozen=True, slots=True)
class Rate:
    """``count`` enqueues per ``per`` seconds: a bucket of ``count`` tokens refilled at
    ``count / per`` a second."""

    count: int
    per: int

    @property
    def refill(self) -> float:
        """Tokens regained per second."""
        return self.count / self.per

    def __str__(self) -> str:
        unit = next(u for u, seconds in RATE_UNITS.items() if seconds == self.per)
        return f"{self.count}/{unit}"


def rate(value: Any, *, name: str, error: ErrorFactory) -> Rate:
    """A rate written ``"N/s"``, ``"N/m"`` or ``"N/h"`` (N a positive whole number), or a
    ``Rate``."""
    if isinstance(value, Rate):
        return value
    match = _RATE.match(value) if isinstance(value, str) else None
    if match is None:
        raise error(
            f'{_must(name)} be a rate such as "100/s", "30/m" or "500/h" (a positive whole '
            f"number per second, minute or hour), got {value!r}"
        )
    count = int(match.group(1))
    if count < 1:
        raise error(f"{_must(name)} allow at least 1 per {match.group(2)}, got {value!r}")
    return Rate(count, RATE_UNITS[match.group(2)])


# The limits a kind may set (a task option, a JOBQUEUE["LIMITS"] entry, set_limit): each
# name's kind of value. None lifts any of them.
LIMIT_NAMES = {
    "max_in_flight": "count",
    "rate_limit": "rate",
    "max_in_flight_per_key": "count",
    "rate_limit_per_key": "rate",
    "ordered": "flag",
    "fair": "flag",
}


def limit(limit_name: str, value: Any, *, name: str, error: ErrorFactory) -> Any:
    """One limit's value checked (``LIMIT_NAMES`` says what it takes), None for none."""
    if value is None:
        return None
    what = LIMIT_NAMES[limit_name]
    if what == "count":
        return positive_int(value, name=name, error=error, allow_none=True)
    if what == "rate":
        return rate(value, name=name, error=error)
    if not isinstance(value, bool):
        raise error(f"{_must(name)} be True or False, got {value!r}")
    return value
