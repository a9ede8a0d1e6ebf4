"""Reads for browsing a table of millions of jobs at a flat cost: bounded counts with the
planner's estimate beyond them, and the distinct kinds by a loose index scan.

An exact ``COUNT(*)`` reads every matching row; past ``cap`` rows these read only the
first ``cap + 1`` and ask the database's planner how many there are (where it gives no
estimate, SQLite's and MySQL's dialects, they count exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Model, QuerySet

from django_jobqueue.store import sql
from django_jobqueue.store.dialects import for_alias

COUNT_CAP = 2_000


@dataclass(frozen=True)
class Count:
    """How many rows match: exact, or (``estimated``) the planner's guess past the cap."""

    value: int
    estimated: bool


def count(qs: QuerySet[Any], *, cap: int = COUNT_CAP) -> Count:
    """How many rows ``qs`` matches, reading at most ``cap + 1`` of them."""
    # Unordered, so the planner reads the first cap + 1 matches by whichever path finds
    # them cheapest (an order would tie it to one index, however rare the matches).
    bounded = qs.order_by().values("pk")[: cap + 1].count()
    if bounded <= cap:
        return Count(bounded, estimated=False)
    planned = planned_rows(qs)
    if planned is None:  # no estimate to be had: count them all
        return Count(qs.count(), estimated=False)
    return Count(max(planned, bounded), estimated=True)


def planned_rows(qs: QuerySet[Any]) -> int | None:
    """The planner's estimate of the rows ``qs`` returns (None where there is none)."""
    return for_alias(qs.db).planned_rows(qs)


def distinct_values(model: type[Model], column: str, *, limit: int | None = None) -> list[str]:
    """The distinct values of an indexed column, in order: one index probe per value
    (a recursive "loose index scan"), not a read of the whole table; the first ``limit``.
    ``IS NOT NULL`` is spelt out: it lets an index that leaves NULLs out (the job key's
    partial index) serve, where ``min()`` alone would read the whole table."""
    table = model._meta.db_table
    name = connections[sql.alias()].ops.quote_name(column)
    statement = (
        f"WITH RECURSIVE v(val) AS ("
        f" SELECT (SELECT min({name}) FROM {table} WHERE {name} IS NOT NULL)"
        f" UNION ALL SELECT (SELECT min({name}) FROM {table}"
        f" WHERE {name} IS NOT NULL AND {name} > v.val)"
        f" FROM v WHERE v.val IS NOT NULL)"
        f" SELECT val FROM v WHERE val IS NOT NULL"
    ) + ("" if limit is None else f" LIMIT {int(limit)}")
    with connections[sql.alias()].cursor() as cursor:
        cursor.execute(statement)
        return [row[0] for row in cursor.fetchall()]
