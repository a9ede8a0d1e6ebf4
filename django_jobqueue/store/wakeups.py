"""Wake-ups: workers told at once that a job became runnable, where the database can
tell them (LISTEN/NOTIFY on PostgreSQL, the dialect's ``listen``/``notify``); elsewhere
``notify`` is a no-op and workers poll.

New jobs are announced by a trigger on the jobs table (migration 0002); ``notify`` is
for the other ways a job becomes runnable (requeue, a merge that moves it earlier).
Either runs inside the writing transaction, so PostgreSQL delivers it only on commit.
``Listener`` holds one dedicated autocommit connection for a worker, opened on the
alias named by ``LISTEN_DATABASE``: behind a transaction pooler (PgBouncer) the jobs
alias cannot LISTEN, since its session is lent to other clients between
transactions, so that setting names a direct connection to the same database.
NOTIFY itself is transactional and goes through the jobs alias, pooled or not.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.storage import Wakeups

logger = logging.getLogger("django_jobqueue")

CHANNEL = "django_jobqueue"


def supported(alias: str) -> bool:
    """Whether workers on database ``alias`` are woken (else they poll)."""
    return for_alias(alias).listens()


def notify(alias: str, queue: str) -> None:
    """Announce a new job on ``queue``; delivered when the surrounding transaction commits."""
    for_alias(alias).notify(CHANNEL, queue)


class Listener:
    """A background thread that calls ``on_notify`` for each NOTIFY on the channel.

    It reconnects with backoff if its connection drops; ``stop()`` ends it.
    """

    def __init__(self, alias: str, on_notify: Callable[[str], None]) -> None:
        self.alias = alias
        self.on_notify = on_notify
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobqueue-listener", daemon=True)
        self.listening = threading.Event()

    def start(self) -> None:
        if supported(self.alias):
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _connect(self) -> Wakeups:
        return for_alias(self.alias).listen(CHANNEL)

    def _run(self) -> None:
        pause = 0.1
        while not self._stop.is_set():
            raw: Wakeups | None = None
            try:
                raw = self._connect()
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
