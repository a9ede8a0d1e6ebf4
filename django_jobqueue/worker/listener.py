"""The worker's listener: a background thread on its own connection that wakes the loop
for each wake-up the database sends (``store.wakeups``; PostgreSQL's NOTIFY), so a new
job is claimed at once instead of at the next poll. Where the loop's own connection can
listen, the loop does without it (``worker.inline``); ``listener_for`` picks."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from django_jobqueue import routing
from django_jobqueue.store import wakeups
from django_jobqueue.store.dialects.base.wakeups import Wakeups
from django_jobqueue.worker import LISTENING
from django_jobqueue.worker.dbguard import DbGuard
from django_jobqueue.worker.inline import InlineListener, inline_possible
from django_jobqueue.worker.wake import Wake

logger = logging.getLogger("django_jobqueue")


class Listener:
    """A background thread that calls ``on_notify`` for each NOTIFY on the channel.

    It reconnects with backoff if its connection drops; ``stop()`` ends it.
    """

    def __init__(self, alias: str, on_notify: Callable[[str], None], *, wake: Wake) -> None:
        self.alias = alias
        self.on_notify = on_notify
        self._wake = wake
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobqueue-listener", daemon=True)
        self.listening = threading.Event()

    def start(self) -> None:
        if wakeups.supported(self.alias):
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def wait(self, timeout: float) -> None:
        """The loop's wait: until woken (this thread's ``on_notify``, a run's end, a
        stop) or ``timeout`` seconds have passed."""
        self._wake.wait(timeout)

    def _connect(self) -> Wakeups:
        return wakeups.listen(self.alias)

    def _run(self) -> None:
        pause = 0.1
        while not self._stop.is_set():
            raw: Wakeups | None = None
            try:
                raw = self._connect()
                logger.info("%s on a connection of its own to %r", LISTENING, self.alias)
                self.listening.set()
                # A reconnect may have missed notifications: wake once to look.
                self.on_notify("")
                pause = 0.1
                while not self._stop.is_set():
                    for payload in raw.payloads(timeout=0.5):
                        self.on_notify(payload)
            except Exception:
                self.listening.clear()
                logger.warning("listener connection lost; reconnecting", exc_info=True)
                self._stop.wait(pause)
                pause = min(pause * 2, 5.0)
            finally:
                if raw is not None:
                    with contextlib.suppress(Exception):  # closing a dead connection
                        raw.close()


def listener_for(
    alias: str, on_notify: Callable[[str], None], *, wake: Wake, db: DbGuard
) -> Listener | InlineListener:
    """The loop's own connection listening where it can (``worker.inline``), else a
    listener thread on a connection of its own to the alias LISTEN goes through."""
    listen_alias = routing.listen_alias()
    if inline_possible(alias, listen_alias):
        return InlineListener(alias, on_notify, wake=wake, db=db)
    return Listener(listen_alias, on_notify, wake=wake)
