"""The worker loop's wake-up: ``threading.Event``'s ``set``, ``clear``, ``is_set`` and
``wait``, on one lock, and a wait that also ends when a socket becomes readable.

An ``Event`` wakes its waiter through a ``Condition``: the setter takes the condition's
lock and releases a lock made for the waiter, which wakes and takes the condition's
lock again. Here the flag is the lock itself (held: not set; free: set), so a set is
one release and the waiter's wake one acquire. On the shared two-core machine a
thread woken from a socket through a second thread took 100–115 µs at p50 through an
``Event`` and 78–84 µs through a lock (``docs/explanation/performance.md``): a run's
end is one such hop.

``wait_readable`` is the idle loop's wait when it listens on its own connection
(``worker.inline``): the kernel wakes the loop itself when a NOTIFY arrives, instead of
waking a listener thread that wakes the loop. A set during that wait also writes a
byte to a socket pair the wait polls (only then: a set while nobody polls is the
lock's release alone).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class Wake:
    """A set/clear flag one thread waits on and any thread sets."""

    __slots__ = ("_lock", "_pair", "_polling")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # not set
        self._pair: tuple[socket.socket, socket.socket] | None = None
        # True while the waiter polls in ``wait_readable``: a set then pokes the pair.
        # The setter releases the lock before it reads this, and the waiter sets it
        # before it reads the lock, so one of them always sees the other (the GIL
        # orders both).
        self._polling = False

    def set(self) -> None:
        if self._lock.locked():
            try:  # noqa: SIM105 (each run's end sets it: no context manager per call)
                self._lock.release()
            except RuntimeError:  # another thread set it in between: set it is
                pass
            if self._polling and self._pair is not None:
                with contextlib.suppress(BlockingIOError):  # full: it is readable already
                    self._pair[1].send(b"\0")

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

    def wait_readable(self, fd: int, timeout: float) -> bool:
        """Until set, ``fd`` readable or ``timeout`` seconds passed; whether ``fd`` is
        readable (the flag may be set as well). One thread waits this way at a time."""
        pair = self._pair
        if pair is None:
            pair = self._pair = socket.socketpair()
            for end in pair:
                end.setblocking(False)
        self._polling = True
        try:
            if self.is_set():
                return False
            ready = _poll((fd, pair[0].fileno()), timeout)
        finally:
            self._polling = False
        if pair[0].fileno() in ready:
            with contextlib.suppress(BlockingIOError):  # a poke after the poll: next time
                while pair[0].recv(64):
                    pass
        return fd in ready

    def close(self) -> None:
        """Close the socket pair, if a wait made one."""
        pair, self._pair = self._pair, None
        for end in pair or ():
            end.close()


def _poll(fds: tuple[int, ...], timeout: float) -> set[int]:
    """The ``fds`` readable within ``timeout`` seconds (``poll``: no limit on descriptor
    numbers, as ``select`` has; ``select`` where there is no ``poll``)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        events = poller.poll(max(int(timeout * 1000 + 0.999), 0))
        return {fd for fd, _ in events}
    readable, _, _ = select.select(list(fds), [], [], max(timeout, 0.0))
    return set(readable)
