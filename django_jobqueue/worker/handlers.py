"""What a signal handler may do: hand its work to a thread of its own.

A handler runs in the main thread between two of its bytecodes, possibly while that
thread holds a lock: inside ``Event.wait``, between taking the event's lock and
waiting on it. A handler that then sets the event (a stop does) waits for a lock its
own thread holds, forever: a worker or a supervisor that never ends on SIGTERM (seen
once in the chaos campaign's supervised workers). ``queue.SimpleQueue.put`` is made
for this (reentrant, safe in a signal handler), so the handler only puts its work on
one, and a thread started beforehand does it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class SignalWork:
    """A daemon thread doing, in order, the work signal handlers hand it (``soon``)."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def soon(self, work: Callable[[], None]) -> None:
        """Have ``work`` done on the thread: the one call a handler makes."""
        self._queue.put(work)

    def _run(self) -> None:
        while True:
            self._queue.get()()
