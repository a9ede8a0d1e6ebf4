"""The raw limit's enqueue side (bench/rawlimit.py): psycopg 3 on DATABASE_URL, no
framework. Each function mirrors the one of the systems' clients it is the limit of."""

from __future__ import annotations

import os
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from bench.clients import WARMUP, paced, timed_calls
from bench.rawlimit import (
    BATCH,
    CHANNEL,
    COPY,
    INSERT_MANY,
    INSERT_NOTIFY,
    INSERT_ONE,
    KIND,
    SCHEMA,
    STAMP_KIND,
)


def _connect() -> psycopg.Connection[Any]:
    return psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)


def install() -> None:
    with _connect() as conn:
        conn.execute(SCHEMA)


def enqueue_each(n: int) -> float:
    """One INSERT per job in autocommit: an insert and a commit a job, one connection."""
    with _connect() as conn:
        return timed_calls(lambda: conn.execute(INSERT_ONE, (KIND, Jsonb({}))), n)


def _insert_batches(conn: psycopg.Connection[Any], n: int) -> None:
    with conn.transaction():
        for start in range(0, n, BATCH):
            count = min(BATCH, n - start)
            conn.execute(INSERT_MANY, (KIND, [Jsonb({})] * count))


def enqueue_bulk(n: int) -> float:
    """``n`` jobs by ``INSERT … SELECT FROM unnest(…)`` in batches of BATCH rows, in one
    transaction (as one ``enqueue_many`` is)."""
    with _connect() as conn:
        _insert_batches(conn, WARMUP)
        start = time.perf_counter()
        _insert_batches(conn, n)
        return time.perf_counter() - start


def enqueue_copy(n: int) -> float:
    """``n`` jobs by one ``COPY … FROM STDIN`` in one transaction."""
    with _connect() as conn:
        start = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur, cur.copy(COPY) as copy:
            for _ in range(n):
                copy.write_row((KIND, "{}"))
        return time.perf_counter() - start


def preload(n: int) -> None:
    with _connect() as conn:
        _insert_batches(conn, n)


def enqueue_requests(n: int) -> float:
    """The per-request enqueue (bench.clients.per_request) at the limit: with
    BENCH_CONN_MAX_AGE 0, a connection opened and closed per job, as Django's default
    does per request; otherwise one connection kept, as ``enqueue_each``."""
    if os.environ.get("BENCH_CONN_MAX_AGE") != "0":
        return enqueue_each(n)

    def one() -> None:
        with _connect() as conn:
            conn.execute(INSERT_ONE, (KIND, Jsonb({})))

    return timed_calls(one, n)


def stamp_series(count: int, gap: float, warmup: int) -> dict[str, float]:
    """The pickup measure's jobs: each inserted and notified in one autocommitted
    statement, as an enqueue with its trigger's NOTIFY is one."""
    with _connect() as conn:

        def submit(label: str) -> None:
            conn.execute(INSERT_NOTIFY, (STAMP_KIND, Jsonb({"label": label}), CHANNEL))

        return paced(count, gap, warmup, submit)
