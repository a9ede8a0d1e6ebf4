"""Whether the calling code runs on an event loop: where Django refuses a query on the
thread (``SynchronousOnlyOperation``), so the queue's own reads go elsewhere, and where
a sync API called from a coroutine must say so."""

from __future__ import annotations

import asyncio


def on_event_loop() -> bool:
    """Whether this thread runs an event loop (the caller is a coroutine's code)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
