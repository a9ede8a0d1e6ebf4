"""What the store's hand-written statements share: the jobs database (its alias, its
connection, its querysets), the table names, the decoding of JSON columns, and the
database's dialect (``dialect()``), which holds everything that differs between
PostgreSQL, SQLite and MySQL/MariaDB. ``Fragment`` is SQL text with its parameters.

The hot paths (enqueue, claim, settle, recovery) bypass the ORM: building and
compiling a query costs more Python than the database spends running it. Values are
always bound as parameters; only names from the models are formatted into SQL.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Q, QuerySet

from django_jobqueue import routing, validation
from django_jobqueue.models import Job, JournalEntry, QueuePause
from django_jobqueue.states import Priority
from django_jobqueue.store.dialects import Interface as Interface
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.store.dialects.base.fragment import Fragment as Fragment

JOB = Job._meta.db_table
JOURNAL = JournalEntry._meta.db_table
PAUSED = QueuePause._meta.db_table

# Every priority: the pending rows' only index on visible_at is the claim index,
# (priority, visible_at, id), so a read of pending rows by visible_at goes one priority
# at a time (each an ordered range of that index) or names them all (EVERY_PRIORITY, a
# condition that always holds: jobqueue_job_priority_valid), never the whole index.
# (Their index on visible_at alone, jobqueue_job_next, cost every pending row an entry;
# migration 0028 dropped it, issue 36.)
PRIORITIES = tuple(Priority.values)
EVERY_PRIORITY = Q(priority__in=PRIORITIES)


def alias() -> str:
    """The current queue database (``routing.current``): DATABASE unless a block, or
    the worker process, chose another of DATABASES."""
    return routing.current()


def connection() -> BaseDatabaseWrapper:
    return connections[alias()]


def jobs() -> QuerySet[Job]:
    return Job.objects.using(alias())


def journal_entries() -> QuerySet[JournalEntry]:
    return JournalEntry.objects.using(alias())


dumps = validation.dumps


def loads(value: Any) -> Any:
    """A JSON column as read by a raw cursor (text on both backends; None stays None);
    a value that cannot be decoded is a ``validation.Undecodable``, never an error."""
    if value is None or not isinstance(value, str | bytes):
        return value
    if value == "{}":  # the usual empty carry or payload, without the parser
        return {}
    return validation.decode(value)


def dialect() -> Interface:
    """The jobs database's dialect (resolved once per alias)."""
    return for_alias(alias())
