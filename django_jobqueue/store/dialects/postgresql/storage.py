"""PostgreSQL's storage half of its dialect (see ``dialects.base``)."""

from __future__ import annotations

from django_jobqueue.store.dialects.base.storage import StorageStatements


class PostgreSQLStorage(StorageStatements):
    """PostgreSQL: inserts, tokens, journal deletion, percentiles, wake-ups, errors..."""
