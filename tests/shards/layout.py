"""The shards tier's layout, one definition for the test process and its runworker
children (``tests/settings.py`` reads it when ``JOBQUEUE_TEST_SHARDS`` is set): two
queue databases, each on a PostgreSQL cluster of its own that the tier starts, and the
project's own ``default`` beside them holding no queue."""

from __future__ import annotations

import os
from typing import Any

ALIASES = ("shard_a", "shard_b")
# Ports of their own (5510-5519 are this tier's), one cluster each;
# ``JOBQUEUE_TEST_SHARD_PORTS`` ("5531,5532") moves them, for two checkouts testing at once.
PORTS = tuple(int(p) for p in os.environ.get("JOBQUEUE_TEST_SHARD_PORTS", "5512,5513").split(","))
NAME = "jq_shards"
# A second alias of shard_a's database, standing for its READ replica (a test mirror).
REPLICA = "shard_a_ro"
# The queue pinned to shard_b whatever its jobs' keys ("by queue").
PINNED_QUEUE = "mail"


def queue_databases(**changes: Any) -> dict[str, Any]:
    """The JOBQUEUE DATABASES setting of the tier (``changes`` replace its keys)."""
    return {
        "ALIASES": list(ALIASES),
        "ROUTE": "key",
        "QUEUES": {PINNED_QUEUE: "shard_b"},
        **changes,
    }


def by_kind(*, kind: str, queue: str, key: str | None) -> str:
    """A ROUTE callable: ``add`` jobs on shard_b, every other kind on shard_a."""
    return "shard_b" if kind.endswith(".add") else "shard_a"


def nowhere(*, kind: str, queue: str, key: str | None) -> str:
    """A ROUTE callable answering an alias that is no queue database."""
    return "elsewhere"
