"""The harness's own connections to PostgreSQL: databases, counts and readiness.

Only a loopback server may be targeted, so the admin URL is checked before anything
connects. Database names are passed as identifiers, never pasted into SQL.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench.phases import Settlements

Conn = psycopg.Connection[Any]


class NotLoopback(ValueError):
    """The benchmark only ever talks to a server on this machine's loopback address."""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Server:
    """The PostgreSQL server under test, reached through an admin URL."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("postgres", "postgresql"):
            raise ValueError(f"--database-url must be a postgres:// URL, got {url!r}")
        if not _is_loopback(parts.hostname or ""):
            raise NotLoopback(f"refusing to benchmark a server that is not on loopback: {url!r}")
        self.parts = parts
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 5432
        self.admin_db = parts.path.lstrip("/") or "postgres"

    def url(self, dbname: str, *, port: int | None = None, sslmode: str | None = None) -> str:
        """The same server (or the proxy, given its ``port``) and credentials, another database."""
        netloc = self.parts.netloc
        if port is not None:
            netloc = f"{netloc.rpartition('@')[0]}@{self.host}:{port}".lstrip("@")
        query = dict(parse_qsl(self.parts.query))
        if sslmode is not None:
            query["sslmode"] = sslmode
        path = "/" + quote(dbname, safe="")
        return urlunsplit((self.parts.scheme, netloc, path, urlencode(query), ""))

    def connect(self, dbname: str | None = None) -> Conn:
        return psycopg.connect(self.url(dbname or self.admin_db), autocommit=True)

    def version(self) -> str:
        with self.connect() as conn:
            return str(scalar(conn, "SHOW server_version"))

    def settings(self, names: tuple[str, ...]) -> dict[str, str]:
        """Server settings worth reporting beside the numbers (autovacuum, fsync, …)."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT name, setting || coalesce(unit, '') FROM pg_settings"
                " WHERE name = ANY(%s) ORDER BY name",
                [list(names)],
            ).fetchall()
        return {str(name): str(value) for name, value in rows}

    def databases(self, like: str) -> list[str]:
        """Databases whose names match the LIKE pattern ``like``."""
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY 1", [like]
            ).fetchall()
        return [str(row[0]) for row in rows]

    def create(self, name: str, *, template: str | None = None) -> None:
        """A new database (dropping a leftover of an interrupted run of the same name)."""
        self.drop(name)
        with self.connect() as conn:
            if template is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            else:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(template)
                    )
                )

    def drop(self, name: str) -> None:
        """Drop ``name``, disconnecting whatever is still connected to it."""
        with self.connect() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def scalar(conn: Conn, query: str, params: Any = None) -> Any:
    """The first column of the first row."""
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def other_backends(conn: Conn) -> list[str]:
    """The last statement of every other connection to this database (workers, mostly)."""
    rows = conn.execute(
        "SELECT coalesce(query, '') FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    ).fetchall()
    return [str(row[0]) for row in rows]


def read_settlements(conn: Conn, table: str, column: str, where: str) -> Settlements | None:
    """The settlement timestamps of the rows ``where`` picks from ``table`` (by their
    ``column``), for bench/phases.py; None when there are none. ``table``, ``column``
    and ``where`` are the systems' constants, never input."""
    row = conn.execute(
        f"SELECT count(*), extract(epoch FROM min({column})), extract(epoch FROM max({column})),"  # noqa: S608 (constants)
        f" count(*) FILTER (WHERE {column} > (SELECT min({column}) FROM {table} WHERE {where}))"
        f" FROM {table} WHERE {where}"
    ).fetchone()
    if row is None or not row[0]:
        return None
    jobs, first, last, after = row
    return Settlements(int(jobs), float(first), float(last), int(after))
