"""The worker loop's wake-up: ``threading.Event``'s ``set``, ``clear``, ``is_set`` and
``wait``, on one lock.

An ``Event`` wakes its waiter through a ``Condition``: the setter takes the condition's
lock and releases a lock made for the waiter, which wakes and takes the condition's
lock again. Here the flag is the lock itself (held: not set; free: set), so a set is
one release and the waiter's wake one acquire. On the shared two-core machine a
thread woken from a socket through a second thread took 100–115 µs at p50 through an
``Event`` and 78–84 µs through a lock (``docs/explanation/performance.md``): the
listener's wake of an idle loop is one such hop, a run's end another.
"""

from __future__ import annotations

import threading


class Wake:
    """A set/clear flag one thread waits on and any thread sets."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # not set

    def set(self) -> None:
        if self._lock.locked():
            try:  # noqa: SIM105 (each run's end sets it: no context manager per call)
                self._lock.release()
            except RuntimeError:  # another thread set it in between: set it is
                pass

    def clear(self) -> None:
        self._lock.acquire(blocking=False)

    def is_set(self) -> bool:
        return not self._lock.locked()

    def wait(self, timeout: float | None = None) -> bool:
        """Until set or ``timeout`` seconds (None: no limit) have passed; whether it is
        set. Like ``Event.wait`` it leaves the flag set."""
        if timeout is None:
            got = self._lock.acquire()
        else:
            got = self._lock.acquire(timeout=min(max(timeout, 0.0), threading.TIMEOUT_MAX))
        if not got:
            return False
        try:  # noqa: SIM105 (as in set)
            self._lock.release()  # still set, as an Event's wait leaves it
        except RuntimeError:  # a setter released it after we took it: set it is
            pass
        return True
