"""New jobs through ``COPY … FROM STDIN``: PostgreSQL's fastest way in for many rows.

A bulk of plain jobs is written as COPY's text format, in one COPY per call (the
server parses and inserts while Python renders the next piece, the two overlapping on
two cores). COPY is an INSERT to the table: the varchar bounds, the constraints and the
statement-level NOTIFY trigger (migration 0002) apply as they do to one, and it joins
the caller's transaction (Django's connection's psycopg connection).

The columns are ``ROW_COLUMNS`` then ``FRESH_COLUMNS`` (the insert's own), with the
two that differ on every row, the id and the payload, moved to the front: the rest of
a line repeats across a batch (one kind, queue, priority, the same instants and trace
context), so it is rendered once per distinct value and reused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any

from django_jobqueue.store.dialects.base.storage import (
    FRESH_COLUMNS,
    JOB,
    ROW_COLUMNS,
    NewRow,
)

# Lines per write to the server: large enough that a write's overhead does not count,
# small enough that the server has work while the next piece is rendered.
PIECE = 2000

_FRONT = ("id", "payload")
_REST = tuple(name for name in ROW_COLUMNS if name not in _FRONT)
COPY_COLUMNS: tuple[str, ...] = (*_FRONT, *_REST, *(name for name, _ in FRESH_COLUMNS))
COPY_JOBS = f"COPY {JOB} ({', '.join(COPY_COLUMNS)}) FROM STDIN"

_SPECIAL = re.compile(r"[\\\t\n\r]")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
NULL = "\\N"


def field(value: str) -> str:
    """Text as one field of COPY's text format: its backslashes, tabs and line ends
    escaped (JSON text has no raw tab or line end, but its strings' escapes do have
    backslashes)."""
    return value.translate(_ESCAPES) if _SPECIAL.search(value) else value


def _literal(sql: str) -> str:
    """An SQL literal of ``FRESH_COLUMNS`` ('pending', 0, false...) as COPY's text."""
    if sql.startswith("'") and sql.endswith("'"):
        return field(sql[1:-1].replace("''", "'"))
    return sql


def _value(value: Any) -> str:
    """One repeated value of a row as COPY's text: NULL, a number, an instant, text."""
    if value is None:
        return NULL
    if isinstance(value, str):
        return field(value)
    if hasattr(value, "isoformat"):
        return str(value.isoformat())  # with its UTC offset: no session zone involved
    return str(value)


_FRESH = "\t".join(_literal(sql) for _, sql in FRESH_COLUMNS)
_rest_of = attrgetter(*_REST)


def lines(rows: Iterable[NewRow]) -> Iterator[str]:
    """The rows as COPY text, ``PIECE`` lines at a time."""
    tails: dict[tuple[Any, ...], str] = {}
    piece: list[str] = []
    for row in rows:
        rest = _rest_of(row)
        tail = tails.get(rest)
        if tail is None:
            tail = tails[rest] = "\t".join([*map(_value, rest), _FRESH]) + "\n"
        # The id as 32 hex digits (``uuid_in`` reads them): str() of a UUID is slower.
        piece.append(f"{row.id.int:032x}\t{field(row.payload)}\t{tail}")
        if len(piece) == PIECE:
            yield "".join(piece)
            piece = []
    if piece:
        yield "".join(piece)


def copy_jobs(cursor: Any, rows: Iterable[NewRow]) -> None:
    """COPY ``rows`` into the jobs table through ``cursor`` (a psycopg cursor)."""
    with cursor.copy(COPY_JOBS) as copy:
        for piece in lines(rows):
            copy.write(piece)
