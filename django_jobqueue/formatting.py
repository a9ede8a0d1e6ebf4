"""Readable ages and durations, shared by ``manage.py jobqueue`` and the admin."""

from __future__ import annotations


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
