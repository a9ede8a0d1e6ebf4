"""Stream wake-ups: readers of a job's stream told at once that it has new items, where
the database can tell them (LISTEN/NOTIFY on PostgreSQL: channel ``CHANNEL``, payload
the job id, one notification per write, delivered when it commits); elsewhere readers
poll.

For now each reader that follows a stream opens a listening connection of its own
(``listen``), on the alias ``LISTEN_DATABASE`` names, as a worker's listener does; a
per-process listener shared by every reader can take its place here without the
readers changing.
"""

from __future__ import annotations

import uuid

from django_jobqueue import conf
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.wakeups import Wakeups

CHANNEL = "django_jobqueue_stream"


def supported() -> bool:
    """Whether readers are woken (else they poll)."""
    return for_alias(conf.get().listen_database).listens()


def notify(alias: str, job_id: uuid.UUID) -> None:
    """Announce new items of ``job_id``'s stream, when the current transaction commits."""
    for_alias(alias).notify(CHANNEL, str(job_id))


def listen() -> Wakeups:
    """A dedicated connection listening on ``CHANNEL``; its payloads are job ids."""
    return for_alias(conf.get().listen_database).listen(CHANNEL)
