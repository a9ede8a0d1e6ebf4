"""Time-ordered UUIDv7 ids (RFC 9562), monotonic within a process.

Python 3.11 has no ``uuid.uuid7``; ids sort by creation so the primary key
doubles as an age order and keeps b-tree inserts at the right-hand edge.
"""

from __future__ import annotations

import math
import os
import threading
import time
import uuid
from datetime import datetime

from django.utils import timezone

_lock = threading.Lock()
_UUID, _UNKNOWN = uuid.UUID, uuid.SafeUUID.unknown
_new, _setattr = object.__new__, object.__setattr__
_last = 0

# The version and variant bits every UUIDv7 carries (RFC 9562), with nothing else set.
_VERSION_BITS = (0x7 << 76) | (0b10 << 62)


def uuid7() -> uuid.UUID:
    """A new UUIDv7: 48-bit Unix milliseconds, 12 bits of sub-millisecond time, 62 random bits."""
    return uuid7_many(1)[0]


def uuid7_many(count: int) -> list[uuid.UUID]:
    """``count`` new UUIDv7s in increasing order (one clock read and one random draw)."""
    global _last
    nanos = time.time_ns()
    millis = nanos // 1_000_000
    # RFC 9562 method 3: the 12 rand_a bits hold the sub-millisecond fraction.
    sub = ((nanos % 1_000_000) * 4096) // 1_000_000
    head = (millis << 80) | (sub << 64) | _VERSION_BITS
    mask = (1 << 62) - 1
    randoms = os.urandom(8 * count)
    ids = []
    with _lock:
        last = _last
        for i in range(0, 8 * count, 8):
            value = head | (int.from_bytes(randoms[i : i + 8], "big") & mask)
            if value <= last:
                # Same instant (or a clock step back): keep strict order by bumping past it.
                value = last + 1
            last = value
            # What ``UUID(int=value)`` ends with, without its checks of a value made
            # right here (a third of a bulk enqueue's cost of its ids).
            made = _new(_UUID)
            _setattr(made, "int", value)
            _setattr(made, "is_safe", _UNKNOWN)
            ids.append(made)
        _last = last
    return ids


def uuid7_floor(moment: datetime) -> uuid.UUID:
    """The smallest UUIDv7 of ``moment``'s millisecond: every id drawn then or later sorts
    at or after it, so a time is a bound on the primary key. A naive ``moment`` is read
    in Django's default time zone (as Django reads one compared with a date-time column)."""
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, timezone.get_default_timezone())
    # Before 1970 is before every id; year 9999 still fits the 48 bits of milliseconds.
    millis = max(math.floor(moment.timestamp() * 1000), 0)
    return uuid.UUID(int=(millis << 80) | _VERSION_BITS)
