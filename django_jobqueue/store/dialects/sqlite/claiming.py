"""SQLite's claiming half of its dialect (see ``dialects.base``)."""

from __future__ import annotations

from django_jobqueue.store.dialects.base.claiming import ClaimingStatements


class SQLiteClaiming(ClaimingStatements):
    """SQLite: claims, turns and settlements."""
