"""The vertical slice: a chain, released step by step, through run_jobs."""

from __future__ import annotations

import pytest

from django_jobqueue import Status, chain, workflow
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_chain_runs_each_step_after_the_previous() -> None:
    handle = chain(tasks.wf_step.s(label="a"), tasks.wf_step.s(label="b")).enqueue()
    assert handle.steps["0"].status == Status.PENDING
    assert handle.steps["1"].status == Status.WAITING
    ran = run_jobs()
    assert len(ran) == 2
    found = workflow(handle.id)
    assert found.status == "completed"
    assert found.steps["1"].result == {
        "label": "b",
        "parents": {"0": {"label": "a", "parents": {}}},
    }
