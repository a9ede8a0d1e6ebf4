"""A large chord written in one call: every step and edge, in statements of a chunk each
(on PostgreSQL one statement per chunk of steps and edges together, as ``enqueue_many``
writes a chunk of jobs), and nothing of it after a rollback."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from django_jobqueue import chord
from django_jobqueue.models import Job, StepEdge
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.store import sql
from django_jobqueue.store.inserting import BULK_BATCH
from tests.helpers import postgres_only
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

MEMBERS = BULK_BATCH + 7  # two chunks, the second a short one


def test_a_chord_over_one_chunk_is_written_whole_in_one_call() -> None:
    handle = chord([tasks.wf_value.s(x=i) for i in range(MEMBERS)], tasks.wf_total.s()).enqueue()

    assert Job.objects.filter(workflow_id=handle.id).count() == MEMBERS + 1
    assert Job.objects.filter(workflow_id=handle.id, status="pending").count() == MEMBERS
    callback = Job.objects.get(id=handle.steps["callback"].id)
    assert (callback.status, callback.parents_open) == ("waiting", MEMBERS)
    edges = StepEdge.objects.filter(workflow_id=handle.id)
    assert edges.count() == MEMBERS
    assert set(edges.values_list("child_id", flat=True)) == {callback.id}
    assert WorkflowRow.objects.get(id=handle.id).steps_open == MEMBERS + 1


def _write_then_fail() -> None:
    with transaction.atomic():
        chord([tasks.wf_value.s(x=i) for i in range(MEMBERS)], tasks.wf_total.s()).enqueue()
        raise RuntimeError("planned")


def test_a_rolled_back_chord_over_one_chunk_leaves_nothing() -> None:
    with pytest.raises(RuntimeError, match="planned"):
        _write_then_fail()

    assert not Job.objects.exists()
    assert not StepEdge.objects.exists()
    assert not WorkflowRow.objects.exists()


@postgres_only
def test_on_postgresql_a_chord_is_one_statement_per_chunk_of_steps_and_edges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dialect = sql.dialect()
    sent: list[str] = []
    run = type(dialect).run

    def counted(self: Any, statement: str, params: Any) -> Any:
        sent.append(statement)
        return run(self, statement, params)

    monkeypatch.setattr(type(dialect), "run", counted)
    chord([tasks.wf_value.s(x=i) for i in range(MEMBERS)], tasks.wf_total.s()).enqueue()

    writes = [s for s in sent if s.lstrip().upper().startswith(("INSERT", "WITH"))]
    assert len(writes) == 2, writes  # two chunks, each steps and edges in one statement
    assert all("django_jobqueue_stepedge" in s for s in writes)
