"""The storage half of the dialect interface (see ``dialects.base``)."""

from __future__ import annotations


class StorageStatements:
    """What every database's dialect answers for inserts, rate tokens, journal deletion,
    percentiles, wake-ups, connection errors and transactions."""
