"""Wake-ups, the part of the dialect interface (see ``dialects.base``) by which the
database tells listeners that something changed: the channels, what their payloads
carry, and how a dialect notifies and listens. The portable way notifies nothing and
cannot listen (SQLite, MariaDB: workers and waiters poll); PostgreSQL's ``storage``
overrides it with NOTIFY and LISTEN.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from django_jobqueue.store.dialects.base.primitives import Primitives

#: The channel on which settlements announce their jobs once committed: the settled
#: ids, comma-separated (``announce``), at most ``IDS_PER_NOTE`` a notification.
SETTLED_CHANNEL = "django_jobqueue_settled"
#: The channel on which a worker's progress write announces its jobs (same payload).
PROGRESS_CHANNEL = "django_jobqueue_progress"
#: The channel on which a job's stream announces new items: the job's id, one
#: notification per write outside a step, or per step with writes.
STREAM_CHANNEL = "django_jobqueue_stream"
#: Ids a notification carries: 200 of 37 bytes stay under PostgreSQL's 8,000-byte payload.
IDS_PER_NOTE = 200


def id_notes(ids: Iterable[object]) -> list[str]:
    """``ids`` as the payloads of their notifications (see ``IDS_PER_NOTE``)."""
    texts = [str(i) for i in ids]
    return [",".join(texts[n : n + IDS_PER_NOTE]) for n in range(0, len(texts), IDS_PER_NOTE)]


class Wakeups(Protocol):
    """A connection that listens for wake-ups (see ``WakeupStatements.listen``)."""

    def payloads(self, timeout: float) -> Iterator[str]:
        """The payloads that arrive within ``timeout`` seconds."""
        ...

    def notes(self, timeout: float) -> Iterator[tuple[str, str]]:
        """The notifications that arrive within ``timeout`` seconds, as (channel,
        payload): for a connection that listens on several channels."""
        ...

    def close(self) -> None: ...


class Hearing(Protocol):
    """This thread's own connection listening as well (see ``WakeupStatements.listen_here``):
    its notifications go to a handler, whether they arrive with a statement's results or
    alone, which ``read`` takes in once the socket (``fileno``) is readable."""

    def fileno(self) -> int: ...

    def current(self) -> bool:
        """Whether it is still this thread's open connection (a closed or replaced one
        listens no more)."""
        ...

    def read(self) -> int:
        """Take in what the socket holds, each notification to the handler, without
        waiting; how many there were. Raises the driver's error when the connection is
        lost."""
        ...


class WakeupStatements(Primitives):
    """What every dialect answers for wake-ups (a no-op where listeners poll)."""

    def notify(self, channel: str, payload: str) -> None:
        """Wake the listening workers when the current transaction commits (a no-op
        where workers poll)."""

    def announce(self, channel: str, ids: Iterable[object]) -> None:
        """Announce ``ids`` on ``channel`` when the current transaction commits (a
        no-op where nothing listens), in as few notifications as the payload allows."""
        for payload in id_notes(ids):
            self.notify(channel, payload)

    def listen(self, channel: str, *more: str) -> Wakeups:
        """A connection of its own that listens on ``channel`` and ``more`` channels
        (``listens()`` only)."""
        raise NotImplementedError(f"{type(self).__name__} has no wake-ups: workers poll")

    def listens_here(self) -> bool:
        """Whether this thread's own connection can listen as well (``listen_here``):
        not where nothing notifies, nor on a connection that is not the session's own (a
        transaction pooler's, or one lent by a pool, which would go on listening for
        whoever borrows it next)."""
        return False

    def listen_here(self, channel: str, on_note: Callable[[str, str], None]) -> Hearing:
        """This thread's own connection, opened if need be and listening on ``channel``
        too, each notification given to ``on_note(channel, payload)`` (``listens_here``
        only)."""
        raise NotImplementedError(f"{type(self).__name__} cannot listen on its connection")
