"""Wake-ups: workers told at once that a job became runnable, where the database can
tell them (LISTEN/NOTIFY on PostgreSQL, the dialect's ``listen``/``notify``); elsewhere
``notify`` is a no-op and workers poll.

New jobs are announced by a trigger on the jobs table (migration 0002); ``notify`` is
for the other ways a job becomes runnable (requeue, a merge that moves it earlier).
Either runs inside the writing transaction, so PostgreSQL delivers it only on commit.
A worker LISTENs on the connection its loop claims with (``listen_here``,
worker/inline.py) where that connection is the session's own; otherwise its
``Listener`` (worker/listener.py) holds one dedicated autocommit connection from
``listen``, opened on the alias named by ``LISTEN_DATABASE``: behind a transaction
pooler (PgBouncer) the jobs alias cannot LISTEN, since its session is lent to other
clients between transactions, so that setting names a direct connection to the same
database.
NOTIFY itself is transactional and goes through the jobs alias, pooled or not.

The other channels reach the process's one listener (``store.listening``), not the
workers: settlements and progress writes (the live pages, ``JobHandle.wait``), and a
job's stream (``STREAM_CHANNEL``, payload the job id, one notification per write,
delivered when it commits; ``announce_stream``): however many follow a stream, the
process costs the database one connection. Where nothing notifies, readers poll.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from django_jobqueue.store import sql
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.wakeups import PROGRESS_CHANNEL as PROGRESS_CHANNEL
from django_jobqueue.store.dialects.base.wakeups import SETTLED_CHANNEL as SETTLED_CHANNEL
from django_jobqueue.store.dialects.base.wakeups import STREAM_CHANNEL as STREAM_CHANNEL
from django_jobqueue.store.dialects.base.wakeups import Hearing, Wakeups

CHANNEL = "django_jobqueue"
#: Every channel the queue notifies on: new jobs, settlements, progress.
CHANNELS = (CHANNEL, SETTLED_CHANNEL, PROGRESS_CHANNEL, STREAM_CHANNEL)


def supported(alias: str) -> bool:
    """Whether workers on database ``alias`` are woken (else they poll)."""
    return for_alias(alias).listens()


def notify(alias: str, queue: str) -> None:
    """Announce a new job on ``queue``; delivered when the surrounding transaction commits."""
    for_alias(alias).notify(CHANNEL, queue)


def announce_settled(ids: Iterable[object]) -> None:
    """Announce jobs that an operator's write settled (a cancel): delivered on commit,
    as a worker's settlements announce theirs (inside their one statement on PostgreSQL)."""
    sql.dialect().announce(SETTLED_CHANNEL, ids)


def announce_progress(ids: Iterable[object]) -> None:
    """Announce jobs whose live progress was just written."""
    sql.dialect().announce(PROGRESS_CHANNEL, ids)


def announce_stream(alias: str, job_id: uuid.UUID) -> None:
    """Announce new items of ``job_id``'s stream, when the current transaction commits."""
    for_alias(alias).notify(STREAM_CHANNEL, str(job_id))


def listen(alias: str) -> Wakeups:
    """A dedicated connection to ``alias`` listening on the channel (the worker's
    ``Listener`` holds it)."""
    return for_alias(alias).listen(CHANNEL)


def listens_here(alias: str) -> bool:
    """Whether a thread's own connection to ``alias`` can listen as well."""
    return for_alias(alias).listens_here()


def listen_here(alias: str, on_note: Callable[[str, str], None]) -> Hearing:
    """This thread's connection to ``alias`` listening on the channel as well
    (``worker.inline``: an idle worker's loop waits on the connection it claims with;
    ``listens_here`` only)."""
    return for_alias(alias).listen_here(CHANNEL, on_note)
