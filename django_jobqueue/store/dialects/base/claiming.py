"""The claiming half of the dialect interface (see ``dialects.base``)."""

from __future__ import annotations


class ClaimingStatements:
    """What every database's dialect answers for claims, turns and settlements."""
