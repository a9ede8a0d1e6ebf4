"""PostgreSQL reads a batch of settlements back from its document (``RELATION``) as the
rows they were: every column of ``s`` the row's value, a field a row's array ends
before as NULL, a JSON null in an open field as no value (the job keeps its carry), and
the journal's duration as the run's microseconds in seconds. (The builders' side, each
element in its order: tests/unit/test_row_documents.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from django_jobqueue.store.dialects.base.settling import SettleRow
from django_jobqueue.store.dialects.postgresql.claiming import RELATION, document
from tests.helpers import postgres_only
from tests.helpers import settlement_row as _row

pytestmark = [pytest.mark.django_db, postgres_only]

OPEN = ("carry", "result", "attachment", "logs")


def _read(rows: list[SettleRow]) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(RELATION, [document(rows)])
        names = [c.name for c in cursor.description]
        read = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    for row in read:  # Django reads jsonb as its text, for JSONField to decode
        for name in OPEN:
            if isinstance(row[name], str):
                row[name] = json.loads(row[name])
    return read


def _expected(row: SettleRow) -> dict[str, Any]:
    logged = row.logs is not None
    return {
        **{name: getattr(row, name) for name in _COPIED},
        "duration": None if row.micros is None else row.micros / 1_000_000,
        "dropped": row.dropped if logged else None,
        "logs_from": row.logs_from if logged else None,
    }


_COPIED = (
    *("id", "run_no", "kind", "status", "outcome", "visible_at", "failed", "carry", "result"),
    *("note", "attachment", "started_at", "worker", "recorded_at", "claimed", "c_status"),
    *("c_outcome", "c_note", "shard", "micros", "bucket", "logs"),
)


def test_every_column_reads_back_as_the_row_wrote_it() -> None:
    rows = [
        _row(),  # every field
        _row(logs=None),  # ends before its log lines
        _row(  # a no-op's success: ends before every optional field
            status="completed",
            outcome="succeeded",
            visible_at=None,
            failed=0,
            carry=None,
            note="",
            attachment=None,
            c_status=None,
            c_outcome=None,
            c_note=None,
            logs=None,
        ),
        _row(micros=None, started_at=None, bucket=None),  # a run released at shutdown
    ]
    read = _read(rows)
    assert read == [_expected(row) for row in rows]
    assert set(read[0]) == {*_COPIED, "duration", "dropped", "logs_from"}


@pytest.mark.parametrize("result", [False, 0, "", [], {}, "null", [None]])
def test_a_falsy_result_is_kept_and_only_none_is_no_value(result: Any) -> None:
    rows = [_row(result=result), _row(result=None, carry=None)]
    [kept, _] = _read(rows)
    assert kept["result"] == result
    with connection.cursor() as cursor:  # SQL's NULL, not JSON's null: COALESCE keeps a carry
        cursor.execute(
            f"SELECT result IS NULL, carry IS NULL FROM ({RELATION}) AS s", [document(rows)]
        )
        assert cursor.fetchall() == [(False, False), (True, True)]
