"""Argument types shared by the management commands; each error names what is wrong."""

from __future__ import annotations

from argparse import ArgumentTypeError


def positive_int(text: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    """A non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if value < 0:
        raise ArgumentTypeError(f"must not be negative, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """A number of seconds above zero (a poll interval of 0 would spin on the database)."""
    value = seconds(text)
    if value == 0:
        raise ArgumentTypeError(f"must be above 0, got {text!r}")
    return value
