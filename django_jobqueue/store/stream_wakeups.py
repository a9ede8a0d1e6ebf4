"""Stream wake-ups: readers of a job's stream told at once that it has new items, where
the database can tell them (LISTEN/NOTIFY on PostgreSQL: channel ``CHANNEL``, payload
the job id, one notification per write, delivered when it commits); elsewhere readers
poll. Readers listen through the process's one listener (``store.listening``), as
``JobHandle.wait`` and the live pages do: however many follow a stream, the process
costs the database one connection.
"""

from __future__ import annotations

import uuid

from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.wakeups import STREAM_CHANNEL

CHANNEL = STREAM_CHANNEL


def notify(alias: str, job_id: uuid.UUID) -> None:
    """Announce new items of ``job_id``'s stream, when the current transaction commits."""
    for_alias(alias).notify(CHANNEL, str(job_id))
