"""PostgreSQL's claiming half of its dialect (see ``dialects.base``)."""

from __future__ import annotations

from django_jobqueue.store.dialects.base.claiming import ClaimingStatements


class PostgreSQLClaiming(ClaimingStatements):
    """PostgreSQL: claims, turns and settlements."""
