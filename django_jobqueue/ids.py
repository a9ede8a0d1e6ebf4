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
_last = 0


def uuid7() -> uuid.UUID:
    """A new UUIDv7: 48-bit Unix milliseconds, 12 bits of sub-millisecond time, 62 random bits."""
    global _last
    nanos = time.time_ns()
    millis = nanos // 1_000_000
    # RFC 9562 method 3: the 12 rand_a bits hold the sub-millisecond fraction.
    sub = ((nanos % 1_000_000) * 4096) // 1_000_000
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (millis << 80) | (0x7 << 76) | (sub << 64) | (0b10 << 62) | rand_b
    with _lock:
        if value <= _last:
            # Same instant (or a clock step back): keep strict order by bumping past the last.
            value = _last + 1
        _last = value
    return uuid.UUID(int=value)
