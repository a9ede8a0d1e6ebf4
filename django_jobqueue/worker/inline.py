"""The loop listening on its own connection: where the connection a worker claims with
is the session's own (PostgreSQL, the jobs alias is also the one to LISTEN through, no
transaction pooler, no pool lending it out), it LISTENs on that connection and the
idle loop waits on its socket itself (``Wake.wait_readable``).

An idle worker's pickup then wakes one thread fewer: the kernel wakes the loop at the
NOTIFY, not a listener thread that wakes the loop, and the claim goes out on the
connection whose server process has just sent that NOTIFY, not on one that slept. The
raw limit of the bench listens and claims this way (``bench/limit_worker.py``).
Notifications that arrive during the loop's statements reach ``on_notify`` as they are
read (a busy loop is woken for its next wait, as by the listener thread), and none is
missed across a reconnect: a connection listening anew wakes the loop once, to look.

Elsewhere the worker keeps its listener thread (``worker.listener``); both answer the
loop's ``wait`` the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django_jobqueue.store import wakeups
from django_jobqueue.store.dialects.base.wakeups import Hearing
from django_jobqueue.worker import LISTENING
from django_jobqueue.worker.dbguard import DbGuard
from django_jobqueue.worker.wake import Wake

logger = logging.getLogger("django_jobqueue")

#: Times in a row the idle loop's socket may be readable with no notification in it
#: before the connection is taken for broken (a message in pieces takes two or three).
IDLE_READS = 100


class InlineListener:
    """LISTEN on the loop's own connection; ``wait`` is the loop's idle wait."""

    def __init__(
        self, alias: str, on_notify: Callable[[str], None], *, wake: Wake, db: DbGuard
    ) -> None:
        self.alias = alias
        self.on_notify = on_notify  # looked up at each notification (tests spy on it)
        self._wake = wake
        self._db = db
        self._hearing: Hearing | None = None
        self.listening = threading.Event()

    def start(self) -> None:
        """Listen before the first claim (a job committed after it wakes the loop)."""
        self._attach()

    def stop(self) -> None:
        self.listening.clear()
        self._hearing = None  # the loop closes its connection as it ends
        self._wake.close()

    def wait(self, timeout: float) -> None:
        """Until the loop is woken (a NOTIFY, a run's end, a stop) or ``timeout`` seconds
        have passed. A connection not listening yet (new, or replaced after an error) is
        made to listen, and the wait ends at once: the loop looks for what came before."""
        hearing = self._hearing
        if hearing is None or not hearing.current():
            if not self._attach():
                self._wake.wait(timeout)  # no connection: the guard backs off; poll
            return
        deadline = time.monotonic() + timeout
        idle_reads = 0
        while (left := deadline - time.monotonic()) > 0:
            if not self._wake.wait_readable(hearing.fileno(), left):
                return  # woken, or the time is up
            try:
                heard = hearing.read()
            except Exception as exc:  # lost: the loop's next call reconnects
                self._lost(f"the connection was lost while the loop waited: {exc}")
                return
            if self._wake.is_set():
                return
            # Readable with nothing to hear is a message in pieces, or a server notice;
            # over and over, a socket libpq no longer reads: never spin on it.
            idle_reads = 0 if heard else idle_reads + 1
            if idle_reads >= IDLE_READS:
                self._lost("the connection was readable but silent while the loop waited")
                return

    def _attach(self) -> bool:
        """Listen on this thread's connection (opened if need be); whether it does."""
        self.listening.clear()
        self._hearing = self._db(lambda: wakeups.listen_here(self.alias, self._heard))
        if self._hearing is None:
            return False
        logger.info("%s on the loop's own connection to %r", LISTENING, self.alias)
        self.listening.set()
        self._wake.set()  # look once: a job may have come before the LISTEN
        return True

    def _lost(self, why: str) -> None:
        """Close the connection through the guard, which logs it and backs off as for an
        error a call met; then wake the loop, whose next call reconnects."""
        self.listening.clear()
        self._hearing = None
        self._db.failed(why)
        self._wake.set()

    def _heard(self, channel: str, payload: str) -> None:
        if channel == wakeups.CHANNEL:
            self.on_notify(payload)


def inline_possible(alias: str, listen_alias: str) -> bool:
    """Whether the worker's loop can listen on its own connection to ``alias``."""
    return alias == listen_alias and wakeups.listens_here(alias)
