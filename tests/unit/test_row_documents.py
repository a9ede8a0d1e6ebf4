"""PostgreSQL's bulk, workflow-step and edge inserts carry their rows as JSON arrays,
each in its document's order of column names (``BULK_ORDER``, ``STEP_ORDER``,
``EDGE_ORDER``), from which the statements are built: every element a document writes
is the row's value of the column its order names there (read back by that name, so the
builders and the statements cannot drift apart), and an optional column left out reads
as NULL or its default."""

from __future__ import annotations

import json
import uuid
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any

from django_jobqueue.store.dialects.base.storage import ROW_COLUMNS, STEP_COLUMNS, NewRow, NewStep
from django_jobqueue.store.dialects.postgresql import storage

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
    assert sorted(storage.BULK_ORDER) == sorted(ROW_COLUMNS)
    assert sorted(storage.STEP_ORDER) == sorted(
        {*ROW_COLUMNS, *STEP_COLUMNS} - {"dedup_key", "idempotency_key"}
    )
    assert storage.BULK_ORDER[-len(storage.OPTIONAL) :] == storage.OPTIONAL  # the tail


def test_a_full_row_is_written_in_its_order_with_its_own_values() -> None:
    row = _row()
    (written,) = json.loads(storage._bulk_document([row]))
    expected = {f.name: _as_written(f.name, getattr(row, f.name)) for f in fields(NewRow)}
    assert _by_name(storage.BULK_ORDER, written) == expected


def test_a_row_without_the_optional_columns_leaves_them_out() -> None:
    row = _row(**EMPTY)
    (written,) = json.loads(storage._bulk_document([row]))
    assert set(_by_name(storage.BULK_ORDER, written)) == set(ROW_COLUMNS) - set(storage.OPTIONAL)


def test_each_optional_column_alone_is_written_under_its_own_name() -> None:
    for name in storage.OPTIONAL:
        row = _row(**{**EMPTY, name: getattr(_row(), name)})
        (written,) = json.loads(storage._bulk_document([row]))
        read = _by_name(storage.BULK_ORDER, written)
        assert read[name] == getattr(row, name)
        assert all(read.get(other) in (None, "") for other in storage.OPTIONAL if other != name)


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
