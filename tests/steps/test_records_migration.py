"""Migration 0022 moves each job's recorded steps from a list in its row to rows of
``StepRecord``, in order, and back when reversed. A stored value that is not a list of
records is carried over as one record holding it as text, which the loader refuses
(test_bounds), never dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from django_jobqueue.models import Job
from tests.helpers import recorded
from tests.taskapp import steps_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

APP = "django_jobqueue"
JOBS = Job._meta.db_table
BEFORE = [(APP, "0021_merge_lock")]
NOT_A_LIST = '{"not":"a list"}'  # carried over as compact JSON text
RECORDS = [
    {"kind": "step", "name": "s1", "result": {"n": 1}, "at": "t1", "run": 1},
    {"kind": "sleep", "name": "sleep 1", "until": "t2", "at": "t1", "run": 1},
    {"kind": "step", "name": "s2", "result": "é", "at": "t3", "run": 2},
]


def _migrate(targets: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # its loader reads the state just reached


@pytest.fixture
def before() -> Iterator[MigrationExecutor]:
    """The database at 0021, where steps are a list in the job's row; at the latest
    migration again afterwards."""
    latest = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    try:
        yield _migrate(BEFORE)
    finally:
        _migrate(latest)


def test_each_list_becomes_its_records_in_order_and_back(before: MigrationExecutor) -> None:
    jobs = before.loader.project_state(BEFORE[0]).apps.get_model(APP, "Job").objects
    listed, scalar, none = (steps_tasks.many.enqueue(i) for i in range(3))
    jobs.filter(id=listed.id).update(steps=RECORDS)
    jobs.filter(id=scalar.id).update(steps={"not": "a list"})

    executor = _migrate([(APP, "0022_step_records")])

    assert recorded(listed.id) == RECORDS
    assert recorded(scalar.id) == [{"unreadable": NOT_A_LIST}]
    assert recorded(none.id) == []
    sizes = executor.loader.project_state((APP, "0022_step_records")).apps
    rows = sizes.get_model(APP, "StepRecord").objects.filter(job_id=listed.id).order_by("id")
    assert [r.size for r in rows] == [len(json.dumps(r, separators=(",", ":"))) for r in RECORDS]

    _migrate(BEFORE)
    assert dict(jobs.values_list("id", "steps")) == {
        listed.id: RECORDS,
        scalar.id: [{"unreadable": NOT_A_LIST}],
        none.id: None,
    }


def test_a_value_too_deep_to_decode_is_carried_over_as_text(before: MigrationExecutor) -> None:
    """JSON nested deeper than Python's parser goes (written around the queue) is not
    lost: carried over as its text, in a record the loader refuses. Only PostgreSQL's
    jsonb stores it; SQLite's and MariaDB's JSON checks stop far sooner."""
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL stores JSON nested 5,000 levels deep")
    deep = "[" * 5000 + "]" * 5000
    handle = steps_tasks.many.enqueue(1)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {JOBS} SET steps = %s::jsonb WHERE id = %s", [deep, handle.id])
    _migrate([(APP, "0022_step_records")])
    assert recorded(handle.id) == [{"unreadable": deep}]
