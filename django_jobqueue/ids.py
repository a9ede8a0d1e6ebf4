"""Time-ordered UUIDv7 ids (RFC 9562), monotonic within a process.

Python 3.11 has no ``uuid.uuid7``; ids sort by creation so the primary key
doubles as an age order and keeps b-tree inserts at the right-hand edge.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_UUID, _UNKNOWN = uuid.UUID, uuid.SafeUUID.unknown
_new, _setattr = object.__new__, object.__setattr__
_last = 0


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
    head = (millis << 80) | (0x7 << 76) | (sub << 64) | (0b10 << 62)
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
