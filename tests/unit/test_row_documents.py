"""PostgreSQL's workflow-step and edge inserts, and its settlements, carry their rows as
JSON arrays, each in its document's order of column names (``STEP_ORDER``, ``EDGE_ORDER``,
the settlement's ``ORDER``), from which the statements are built: every element a
document writes is the row's value of the column its order names there (read back by
that name, so the builders and the statements cannot drift apart), and an optional
column left out reads as NULL or its default.
Plain jobs go in by COPY (``copying``): each line's fields, read back by the COPY's
column names as the server reads them, are the row's values."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django_jobqueue.store.dialects.base.settling import COLUMNS
from django_jobqueue.store.dialects.base.storage import (
    FRESH_COLUMNS,
    ROW_COLUMNS,
    STEP_COLUMNS,
    NewRow,
    NewStep,
)
from django_jobqueue.store.dialects.postgresql import claiming, copying, storage
from tests.helpers import settlement_row

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
EMPTY = {"dedup_key": None, "idempotency_key": None, "trace_context": "", "job_key": None}


def _row(**changes: object) -> NewRow:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "kind": "shop.tasks.charge",
        "queue": "default",
        "payload": '{"order": 7, "note": "caf\\u00e9 \\"quoted\\""}',
        "priority": 5,
        "created_at": NOW,
        "visible_at": NOW + timedelta(seconds=30),
        "dedup_key": "d-1",
        "idempotency_key": "i-1",
        "trace_context": '{"traceparent": "00-abc"}',
        "job_key": "tenant-a",
    }
    values.update(changes)
    return NewRow(**values)  # type: ignore[arg-type]


def _as_written(name: str, value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return json.loads(value) if name == "payload" else value


def _by_name(order: tuple[str, ...], written: list[Any]) -> dict[str, Any]:
    """A document row read by its order's names (elements past its end: absent)."""
    assert len(written) <= len(order)
    return dict(zip(order, written, strict=False))


def test_the_orders_name_every_column_of_their_insert_once() -> None:
    assert sorted(storage.STEP_ORDER) == sorted(
        {*ROW_COLUMNS, *STEP_COLUMNS} - {"dedup_key", "idempotency_key"}
    )
    fresh = [name for name, _ in FRESH_COLUMNS]
    assert sorted(copying.COPY_COLUMNS) == sorted([*ROW_COLUMNS, *fresh])


_UNESCAPE = {"\\\\": "\\", "\\t": "\t", "\\n": "\n", "\\r": "\r"}


def _copied(line: str) -> dict[str, Any]:
    """A COPY text line read back by the COPY's column names, as the server reads it."""
    assert line.endswith("\n")
    assert line.count("\n") == 1
    values: dict[str, Any] = {}
    for name, text in zip(copying.COPY_COLUMNS, line[:-1].split("\t"), strict=True):
        if text == "\\N":
            values[name] = None
            continue
        values[name] = re.sub(r"\\[\\tnr]", lambda m: _UNESCAPE[m.group()], text)
    return values


def test_a_full_row_is_copied_under_its_column_names_with_its_own_values() -> None:
    row = _row(kind="shop.tasks.tab\there", trace_context='{"a": "back\\\\slash\nline"}')
    (piece,) = copying.lines([row])
    read = _copied(piece)
    assert uuid.UUID(read.pop("id")) == row.id  # as 32 hex digits
    for name in set(ROW_COLUMNS) - {"id"}:
        value = getattr(row, name)
        expected = value.isoformat() if isinstance(value, datetime) else str(value)
        assert read[name] == expected, name
    assert json.loads(read["payload"]) == {"order": 7, "note": 'caf\u00e9 "quoted"'}
    for name, literal in FRESH_COLUMNS:  # 'pending', '', 0, '{}', false as SQL
        assert read[name] == literal.strip("'"), name


def test_a_row_without_the_optional_columns_copies_null_and_the_empty_context() -> None:
    read = _copied(next(copying.lines([_row(**EMPTY)])))
    assert {name: read[name] for name in EMPTY} == {**EMPTY, "trace_context": ""}


def test_rows_are_copied_in_pieces_in_their_order() -> None:
    rows = [_row(priority=n % 3) for n in range(copying.PIECE + 5)]
    pieces = list(copying.lines(rows))
    assert [piece.count("\n") for piece in pieces] == [copying.PIECE, 5]
    read = [_copied(line + "\n") for piece in pieces for line in piece.splitlines()]
    assert [(uuid.UUID(r["id"]), r["priority"]) for r in read] == [
        (w.id, str(w.priority)) for w in rows
    ]


def test_a_workflow_step_is_written_in_the_steps_order_with_its_key() -> None:
    workflow = uuid.uuid4()
    step = NewStep(
        _row(dedup_key=None, idempotency_key=None), workflow, 'b "2"', "any", 2, "waiting"
    )
    (written,) = json.loads(storage._steps_document([step]))
    read = _by_name(storage.STEP_ORDER, written)
    assert read["job_key"] == "tenant-a"  # a step keeps its key (issue 31's first bug)
    assert read["trace_context"] == '{"traceparent": "00-abc"}'
    assert (read["workflow_id"], read["step_name"], read["join_when"]) == (
        str(workflow),
        'b "2"',
        "any",
    )
    assert (read["parents_open"], read["status"], read["kind"]) == (
        2,
        "waiting",
        "shop.tasks.charge",
    )


def test_edges_are_written_in_their_order() -> None:
    w, p, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    (written,) = json.loads(storage._edges_document([(w, p, c)]))
    assert _by_name(storage.EDGE_ORDER, written) == {
        "workflow_id": str(w),
        "parent_id": str(p),
        "child_id": str(c),
    }


def test_the_settlements_order_names_every_field_of_s_once_but_the_derived_duration() -> None:
    assert sorted(claiming.ORDER) == sorted(
        {*COLUMNS, "logs", "dropped", "logs_from"} - {"duration"}
    )


def test_a_full_settlement_is_written_in_its_order_with_its_own_values() -> None:
    row = settlement_row()
    (written,) = json.loads(claiming.document([row]))
    assert len(written) == len(claiming.ORDER)
    read = _by_name(claiming.ORDER, written)
    assert read.pop("id") == row.id.hex
    for name, value in read.items():
        expected = getattr(row, name)
        assert value == (expected.isoformat() if isinstance(expected, datetime) else expected), name


def test_a_plain_settlement_ends_before_the_fields_it_lacks_and_one_without_logs_before_them() -> (
    None
):
    plain = settlement_row(
        visible_at=None,
        carry=None,
        attachment=None,
        c_status=None,
        c_outcome=None,
        c_note=None,
        logs=None,
    )
    unlogged = settlement_row(logs=None)
    written = json.loads(claiming.document([plain, unlogged]))
    assert len(written[0]) == claiming.ORDER.index("visible_at")
    assert len(written[1]) == claiming.ORDER.index("logs")
    assert _by_name(claiming.ORDER, written[1])["c_note"] == "cancelled while retried"
