"""The one interface every database's dialect implements, and what they share.

A dialect is the *how* of the queue's statements on one database: the store's modules
keep the *what* (candidates, guards, tiers, the lifecycle) and ask the dialect for the
SQL and the conversions that differ. The interface is written in two halves, each in
its own module: ``claiming`` (claims, turns and settlements: the hot path) and
``storage`` (inserts, rate tokens, journal deletion, percentiles, the classification
of connection errors, the transaction an atomic run needs, and the rest, on top of
``wakeups``: the channels, NOTIFY and LISTEN); ``health`` reads the tables' health for
the operators. Every statement's values
are bound parameters.
"""

from __future__ import annotations

from typing import ClassVar

from django_jobqueue.store.dialects.base.claiming import ClaimingStatements
from django_jobqueue.store.dialects.base.health import HealthReadings
from django_jobqueue.store.dialects.base.partitions import PartitionStatements
from django_jobqueue.store.dialects.base.storage import StorageStatements


class Dialect(ClaimingStatements, StorageStatements, HealthReadings, PartitionStatements):
    """One database's way of running the queue's statements, for one connection alias."""

    vendor: ClassVar[str] = ""
