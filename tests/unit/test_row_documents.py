"""PostgreSQL's bulk, workflow-step and edge inserts carry their rows as JSON objects,
column name -> value: every name a document writes is a column of the insert, and each
value is the row's own (read back by name, so no position can drift)."""

from __future__ import annotations

import json
import uuid
from dataclasses import fields
from datetime import UTC, datetime, timedelta

from django_jobqueue.store.dialects.base.storage import ROW_COLUMNS, STEP_COLUMNS, NewRow, NewStep
from django_jobqueue.store.dialects.postgresql import storage

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


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


def _expected(row: NewRow) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in fields(NewRow):
        value = getattr(row, f.name)
        if isinstance(value, uuid.UUID | datetime):
            value = str(value) if isinstance(value, uuid.UUID) else value.isoformat()
        elif f.name == "payload":
            value = json.loads(value)
        out[f.name] = value
    return out


def test_a_full_row_is_written_by_column_name_with_its_own_values() -> None:
    row = _row()
    (written,) = json.loads(storage._bulk_document([row]))
    assert set(written) == set(ROW_COLUMNS)
    assert written == _expected(row)


def test_a_row_without_the_optional_columns_leaves_them_out_and_the_rest_named() -> None:
    row = _row(dedup_key=None, idempotency_key=None, trace_context="", job_key=None)
    (written,) = json.loads(storage._bulk_document([row]))
    assert set(written) == set(ROW_COLUMNS) - set(storage.OPTIONAL)
    assert all(written[name] == value for name, value in _expected(row).items() if name in written)


def test_each_optional_column_is_written_alone_when_it_alone_has_a_value() -> None:
    empty = {"dedup_key": None, "idempotency_key": None, "trace_context": "", "job_key": None}
    for name in storage.OPTIONAL:
        row = _row(**{**empty, name: getattr(_row(), name)})
        (written,) = json.loads(storage._bulk_document([row]))
        assert set(written) & set(storage.OPTIONAL) == {name}
        assert written[name] == getattr(row, name)


def test_a_workflow_step_is_a_row_and_its_step_columns_by_name() -> None:
    workflow = uuid.uuid4()
    step = NewStep(
        _row(dedup_key=None, idempotency_key=None), workflow, 'b "2"', "any", 2, "waiting"
    )
    (written,) = json.loads(storage._steps_document([step]))
    assert set(written) == (set(ROW_COLUMNS) - {"dedup_key", "idempotency_key"}) | set(STEP_COLUMNS)
    assert written["job_key"] == "tenant-a"  # a step keeps its key
    assert (written["workflow_id"], written["step_name"], written["join_when"]) == (
        str(workflow),
        'b "2"',
        "any",
    )
    assert (written["parents_open"], written["status"]) == (2, "waiting")


def test_edges_are_written_by_column_name() -> None:
    w, p, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    assert json.loads(storage._edges_document([(w, p, c)])) == [
        {"workflow_id": str(w), "parent_id": str(p), "child_id": str(c)}
    ]
