"""Readable ages and durations, and text made safe for a terminal, shared by
``manage.py jobqueue``, the worker's log and the admin."""

from __future__ import annotations

import re


def fmt_age(seconds: float | None) -> str:
    """A coarse, readable age: 45s, 12m 3s, 5h, 3d 4h (two units at most)."""
    if seconds is None:
        return "-"
    total = max(int(seconds), 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    for big, big_unit, small, small_unit in (
        (days, "d", hours, "h"),
        (hours, "h", minutes, "m"),
        (minutes, "m", secs, "s"),
    ):
        if big:
            return f"{big}{big_unit} {small}{small_unit}" if small else f"{big}{big_unit}"
    return f"{secs}s"


def fmt_seconds(seconds: float | None) -> str:
    """A run duration: 850µs, 12.3ms, 1.52s, 2m 5s."""
    if seconds is None:
        return "-"
    if seconds < 0.001:
        return f"{seconds * 1_000_000:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1000:.1f}ms"
    if seconds < 60:
        return f"{seconds:.2f}s"
    return fmt_age(seconds)


def plural(count: int, one: str, many: str) -> str:
    """``1 entry``, ``2 entries``: a count with its noun agreeing."""
    return f"{count} {one if count == 1 else many}"


# C0 and C1 control characters and DEL, but for newline and tab: an exception's message
# or a step's name holding ESC, BEL, CR, backspace or CSI (\x9b) would move the cursor,
# clear the screen or print fake coloured text on the operator's terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` with each control character written as its escape (``\\x1b``), so the
    operator sees that something was there and the terminal does nothing with it.
    Newlines are kept (a traceback's lines) unless ``newlines`` is False (a one-line
    field)."""
    shown = _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)
    return shown if newlines else shown.replace("\n", "\\n")


def fmt_bytes(size: int | None) -> str:
    """A size: 812 B, 16 kB, 3.4 MB, 1.2 GB (powers of 1,024)."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" or value >= 100 else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TB"
