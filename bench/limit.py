"""The raw limit's own measure, and which of its figures each of ours is a fraction of.

The raw limit (``bench/rawlimit.py``, the system ``limit``) runs beside the systems in
the same run: ``enqueue_each``, ``enqueue_request`` and ``enqueue_bulk`` as every system
does (one INSERT and commit a job; a connection a job at ``CONN_MAX_AGE`` 0;
``INSERT … SELECT FROM unnest(…)`` in batches of 1,000), ``pickup_latency`` as every
system does (its worker LISTENs on the connection it claims with, and a stamp job's
insert notifies in the same statement: the pickup floor with a durable claim), and this
measure of its own,
``limit``: the no-op drain of the run's drain size by two ``bench.limit_worker``
processes claiming 10 at a time, then 100 (each on a fresh database, preloaded, timed
as every drain), and a bulk load by ``COPY``.

The table's ``ours/limit`` column divides each figure of ours by its match here
(``limit_of``): enqueue by the insert-per-job limit, bulk by the unnest bulk limit,
each pickup percentile by the limit's, every no-op drain rate (the polled rate, the
whole run, the steady rate) by the same figure of the two-process batch-100 drain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.results import Measure, Rep, Row
from bench.systems import System
from bench.systems.limit import limit_worker

if TYPE_CHECKING:
    from bench.config import Sizes
    from bench.harness import Bench

LIMIT = "limit"  # the system's key, and its measure's
WORKERS = 2
BATCHES = (10, 100)
REFERENCE = 100  # the batch whose drain ours is a fraction of
NO_OP_DRAINS = frozenset({"drain_1", "drain_2", "drain_defaults", "drain_best"})
SAME_MEASURE = frozenset({"enqueue_each", "enqueue_request", "enqueue_bulk", "pickup_latency"})


def limit_of(measure: str, value: str) -> tuple[str, str] | None:
    """The (measure, value) of the raw limit that ``measure``'s ``value`` of ours is a
    fraction of; None for a figure with no match (counts, ratios, seconds)."""
    if measure in SAME_MEASURE:
        return measure, value
    if measure in NO_OP_DRAINS and value in ("rate", "whole", "steady"):
        return LIMIT, _drain_value(REFERENCE, value)
    if measure == "big_table" and value in ("big", "small"):
        return LIMIT, _drain_value(REFERENCE, "rate")
    return None


def _drain_value(batch: int, value: str) -> str:
    return f"drain_{batch}" if value == "rate" else f"drain_{batch}_{value}"


def limit(b: Bench, s: System) -> Rep:
    values: dict[str, float] = {}
    raw: dict[str, object] = {"workers": WORKERS}
    for batch in BATCHES:
        with b.fresh(s) as db:
            drained = b.timed_drain(s, db, b.sizes.drain, WORKERS, argv=limit_worker(batch))
        values.update({_drain_value(batch, k): v for k, v in drained.values().items()})
        raw[f"drain_{batch}"] = drained.raw()
    n = b.sizes.bulk
    with b.fresh(s) as db:
        seconds = float(b.agent(s, db, "enqueue_copy", n=n))
    values["copy"] = n / seconds
    raw["copy"] = {"n": n, "seconds": seconds}
    return Rep(values, raw)


def limit_measures(sz: Sizes) -> tuple[Measure, ...]:
    drain = f"raw limit: drain {sz.drain:,} no-ops, {WORKERS} processes"
    rows: list[Row] = []
    for batch in BATCHES:
        rows += [
            Row(_drain_value(batch, "rate"), f"{drain} claiming {batch} (jobs/s)"),
            Row(_drain_value(batch, "whole"), "  whole run (jobs/s)"),
            Row(_drain_value(batch, "steady"), "  steady (jobs/s)"),
            Row(_drain_value(batch, "startup"), "  start-up (s)", True),
        ]
    rows.append(Row("copy", f"raw limit: bulk load by COPY, N={sz.bulk:,} (rows/s)"))
    return (Measure(LIMIT, tuple(rows), limit, applies=lambda s: s.is_limit, limit=True),)
