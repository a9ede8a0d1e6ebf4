"""The process's one listener: a daemon thread holding one LISTEN connection (on
PostgreSQL) to every channel the queue notifies on (``wakeups.CHANNELS``: new jobs,
settlements, progress), fanning each notification out to the subscribers of its
channel: threads waiting on a job (``JobHandle.wait``), the admin's live pages. However
many wait or are open, the process costs the database one connection.

It starts with its first subscriber, reconnects with backoff when its connection
drops, and ends after ``IDLE`` seconds without one (the next subscriber starts it
again). After each (re)connect every subscriber gets ``RESYNC``: notifications may
have been missed, read again. ``subscribe`` returns once the connection listens (or
after ``ready`` seconds when it cannot: ``Subscription.live`` then says so, and a
subscriber polls), so a read made after it misses no notification sent after that read.

The worker keeps its own listener (``worker.listener``): its loop must wake even
when a web process's subscribers are slow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from django_jobqueue import routing
from django_jobqueue.store import wakeups
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.wakeups import Wakeups

logger = logging.getLogger("django_jobqueue")

#: Seconds the thread keeps its connection with no subscriber before it ends.
IDLE = 30.0
#: Notes a subscriber holds unread; past it they collapse into one ``RESYNC``.
BACKLOG = 1000


class Note(NamedTuple):
    channel: str
    payload: str


#: "Read again": sent after a (re)connect and in place of an overflowing backlog.
RESYNC = Note("", "")


class Subscription:
    """What one subscriber receives: the notes of its channels, in order, read with
    ``get`` (threads) or ``aget`` (coroutines). A context manager that unsubscribes."""

    def __init__(self, hub: Hub, channels: frozenset[str]) -> None:
        self.hub = hub
        self.channels = channels
        self._notes: deque[Note] = deque()
        self._cond = threading.Condition()
        self._loops: dict[asyncio.AbstractEventLoop, asyncio.Event] = {}

    @property
    def live(self) -> bool:
        """Whether the process's listener holds its connection now."""
        return self.hub.listening.is_set()

    def put(self, note: Note) -> None:
        with self._cond:
            if len(self._notes) >= BACKLOG:
                self._notes.clear()
                note = RESYNC
            self._notes.append(note)
            self._cond.notify_all()
            loops = list(self._loops.items())
        for loop, event in loops:
            with contextlib.suppress(RuntimeError):  # a loop closed meanwhile
                loop.call_soon_threadsafe(event.set)

    def get(self, timeout: float | None) -> Note | None:
        """The next note, waiting up to ``timeout`` seconds (None: no note came)."""
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._notes), timeout):
                return None
            return self._notes.popleft()

    def pending(self) -> list[Note]:
        """Every note received and not yet read, without waiting."""
        with self._cond:
            notes = list(self._notes)
            self._notes.clear()
            return notes

    async def aget(self, timeout: float | None) -> Note | None:
        """``get`` for a coroutine: waits on its event loop, holding no thread."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                if self._notes:
                    return self._notes.popleft()
                event = self._loops.setdefault(loop, asyncio.Event())
                event.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), left)

    def close(self) -> None:
        self.hub.unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Hub:
    """One alias's listener thread and its subscribers."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.listening = threading.Event()
        self._lock = threading.Lock()
        self._subscribers: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: Connections made, for the tests that count them (one per process, not per page).
        self.connections = 0

    def subscribe(self, channels: Iterable[str], *, ready: float = 5.0) -> Subscription:
        wanted = frozenset(channels)
        unknown = wanted - set(wakeups.CHANNELS)
        if unknown:
            raise ValueError(
                f"no such channel: {', '.join(sorted(unknown))}; "
                f"the queue notifies on {', '.join(wakeups.CHANNELS)}"
            )
        sub = Subscription(self, wanted)
        with self._lock:
            self._subscribers.append(sub)
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(
                    target=self._run, name=f"jobqueue-hub-{self.alias}", daemon=True
                )
                self._thread.start()
        self.listening.wait(ready)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._subscribers.remove(sub)

    def subscribers(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def stop(self) -> None:
        """End the thread and close its connection (tests; a process need not)."""
        with self._lock:
            thread = self._thread
        self._stop.set()
        if thread is not None:
            thread.join(timeout=5)

    def _fan(self, note: Note) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for sub in subscribers:
            if note is RESYNC or note.channel in sub.channels:
                sub.put(note)

    def _idle_out(self, since: float) -> bool:
        """Whether to end now (stopped, or no subscriber since ``since``); clears the
        thread under the lock, so a new subscriber starts another."""
        with self._lock:
            if self._stop.is_set() or (not self._subscribers and time.monotonic() - since > IDLE):
                self._thread = None
                return True
            return False

    def _run(self) -> None:
        pause = 0.1
        raw: Wakeups | None = None
        try:
            while not self._stop.is_set():
                try:
                    raw = for_alias(self.alias).listen(*wakeups.CHANNELS)
                    self.connections += 1
                    self.listening.set()
                    self._fan(RESYNC)
                    pause = 0.1
                    if self._listen(raw):
                        return
                except Exception:
                    self.listening.clear()
                    logger.warning("listener connection lost; reconnecting", exc_info=True)
                    self._stop.wait(pause)
                    pause = min(pause * 2, 5.0)
                finally:
                    self.listening.clear()
                    if raw is not None:
                        with contextlib.suppress(Exception):  # closing a dead connection
                            raw.close()
                        raw = None
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None

    def _listen(self, raw: Wakeups) -> bool:
        """Fan out what arrives until idle or stopped (True) or the connection fails."""
        idle_since = time.monotonic()
        while True:
            for channel, payload in raw.notes(timeout=0.5):
                self._fan(Note(channel, payload))
            if self.subscribers():
                idle_since = time.monotonic()
            if self._idle_out(idle_since):
                return True


_hubs: dict[str, Hub] = {}
_hubs_lock = threading.Lock()


def listen_alias() -> str:
    """The alias the process listens through (``LISTEN_DATABASE``, else ``DATABASE``;
    another queue database's own when it is current)."""
    return routing.listen_alias()


def supported() -> bool:
    """Whether this process can be told of changes (else its subscribers poll)."""
    return for_alias(listen_alias()).listens()


def hub() -> Hub:
    alias = listen_alias()
    with _hubs_lock:
        found = _hubs.get(alias)
        if found is None:
            found = _hubs[alias] = Hub(alias)
        return found


def subscribe(channels: Iterable[str], *, ready: float = 5.0) -> Subscription:
    """Subscribe to ``channels`` of the process's listener (started if need be); see
    the module's docstring. Only where ``supported()``."""
    return hub().subscribe(channels, ready=ready)


def stop_all() -> None:
    """Stop every listener of the process (tests, before their database is dropped)."""
    with _hubs_lock:
        hubs = list(_hubs.values())
    for h in hubs:
        h.stop()
