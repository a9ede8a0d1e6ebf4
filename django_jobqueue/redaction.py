"""Hiding secrets when jobs are shown: payload and carry fields whose name contains one
of the ``REDACT`` words (``password``, ``token``, ``secret``, ``authorization`` by
default; case-insensitive) are replaced by a marker wherever they are nested.

Only what is displayed is redacted (the admin, ``manage.py jobqueue show``, logs); the
stored job, and so what the task receives, is never altered.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import conf

MARK = "********"


def redact(value: Any, words: Iterable[str] | None = None) -> Any:
    """A copy of ``value`` with the values of secret-named keys replaced by ``MARK``."""
    lowered = [w.lower() for w in (conf.get().redact if words is None else words)]
    if not lowered:
        return value
    return _redact(value, lowered)


def _redact(value: Any, words: list[str]) -> Any:
    if isinstance(value, dict):
        return {
            key: MARK
            if isinstance(key, str) and any(w in key.lower() for w in words)
            else _redact(item, words)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact(item, words) for item in value]
    return value
