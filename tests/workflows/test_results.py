"""A workflow's result through the public API: its declared output step's result
(``Workflow(..., output=)``), by default a chain's last step, a chord's callback, a
workflow's one final step, a group's members' results in order; ``result`` and
``wait()`` raise ``WorkflowNotFinished``, ``WorkflowFailed`` (a step died, or it was
cancelled), ``NoWorkflowOutput`` and ``TimeoutError`` as documented, and bad arguments
are refused before anything is written."""

from __future__ import annotations

import asyncio

import pytest

from django_jobqueue import (
    InvalidArguments,
    NoWorkflowOutput,
    UnknownStep,
    Workflow,
    WorkflowFailed,
    WorkflowNotFinished,
    chain,
    chord,
    group,
    workflow,
)
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_a_chain_s_result_is_its_last_step_s() -> None:
    handle = chain(tasks.wf_value.s(1), tasks.add.s(2, 3), tasks.wf_value.s(7)).enqueue()
    assert handle.output == "2"
    run_jobs()
    assert handle.wait(timeout=30) == 7
    assert workflow(handle.id).result == 7


def test_a_chord_s_result_is_its_callback_s() -> None:
    handle = chord([tasks.wf_value.s(i) for i in range(3)], tasks.wf_step.s(label="cb")).enqueue()
    run_jobs()
    assert handle.wait(timeout=30) == {"label": "cb", "parents": {"0": 0, "1": 1, "2": 2}}


def test_a_group_s_result_is_its_members_results_in_order() -> None:
    handle = group([tasks.wf_value.s(i) for i in (5, 3, 9)]).enqueue()
    run_jobs()
    assert handle.wait(timeout=30) == [5, 3, 9]


def test_a_workflow_s_declared_output_step_gives_its_result() -> None:
    wf = Workflow("declared")
    a = wf.add(tasks.wf_value.s(1), name="a")
    wf.add(tasks.wf_value.s(2), name="b", after=[a])
    wf.add(tasks.wf_value.s(3), name="c", after=[a])
    wf.output = a  # a StepRef, or a name
    handle = wf.enqueue()
    run_jobs()
    assert handle.wait(timeout=30) == 1
    by_name = Workflow("by name", output="b")
    by_name.add(tasks.wf_value.s(4), name="b")
    handle = by_name.enqueue()
    run_jobs()
    assert handle.wait(timeout=30) == 4


def test_a_workflow_with_one_final_step_gives_its_result_without_declaring_it() -> None:
    wf = Workflow("diamond")
    a = wf.add(tasks.wf_value.s(1), name="a")
    b = wf.add(tasks.wf_value.s(2), name="b", after=[a])
    c = wf.add(tasks.wf_value.s(3), name="c", after=[a])
    wf.add(tasks.wf_step.s(label="d"), name="d", after=[b, c])
    handle = wf.enqueue()
    assert handle.output == "d"
    run_jobs()
    assert handle.wait(timeout=30) == {"label": "d", "parents": {"b": 2, "c": 3}}


def test_a_workflow_with_two_final_steps_and_no_output_has_no_result() -> None:
    wf = Workflow("two ends")
    wf.add(tasks.wf_value.s(1), name="a")
    wf.add(tasks.wf_value.s(2), name="b")
    handle = wf.enqueue()
    run_jobs()
    with pytest.raises(NoWorkflowOutput, match="declares no output step"):
        handle.wait(timeout=30)
    assert {name: h.refresh().result for name, h in handle.steps.items()} == {"a": 1, "b": 2}


def test_a_running_workflow_s_result_raises_workflow_not_finished() -> None:
    handle = chain(tasks.wf_value.s(1), tasks.wf_value.s(2)).enqueue()
    with pytest.raises(WorkflowNotFinished, match=r"still running \(2 of 2 steps open\)"):
        _ = handle.result


def test_wait_raises_timeout_error_naming_the_workflow_when_it_does_not_finish() -> None:
    handle = chain(tasks.wf_value.s(1), tasks.wf_value.s(2)).enqueue()
    with pytest.raises(TimeoutError, match=f"workflow {handle.id} did not finish within 0.2 s"):
        handle.wait(timeout=0.2)


def test_a_failed_workflow_s_result_raises_workflow_failed_naming_the_dead_step() -> None:
    handle = chain(tasks.wf_value.s(1), tasks.wf_step.s(label="b", die=True)).enqueue()
    run_jobs()
    with pytest.raises(WorkflowFailed, match=r"failed, so it has no result \(steps: '1' dead\)"):
        handle.wait(timeout=30)
    with pytest.raises(WorkflowFailed) as failed:
        _ = handle.result
    assert (failed.value.status, failed.value.steps) == ("failed", ["1"])
    assert failed.value.workflow_id == handle.id


def test_a_cancelled_workflow_s_result_raises_workflow_failed() -> None:
    handle = chain(tasks.wf_value.s(1), tasks.wf_value.s(2)).enqueue()
    handle.cancel()
    with pytest.raises(WorkflowFailed, match="was cancelled, so it has no result"):
        handle.wait(timeout=30)


def test_an_output_naming_no_step_is_refused_and_nothing_is_written() -> None:
    wf = Workflow("bad output", output="nope")
    wf.add(tasks.wf_value.s(1), name="a")
    with pytest.raises(UnknownStep, match="output names 'nope', which is no step of it"):
        wf.enqueue()
    other = Workflow("other")
    ref = other.add(tasks.wf_value.s(1), name="a")
    wf.output = ref
    with pytest.raises(UnknownStep, match="output names"):
        wf.enqueue()
    assert not WorkflowRow.objects.exists()


def test_bad_wait_arguments_are_refused_naming_them() -> None:
    handle = chain(tasks.wf_value.s(1)).enqueue()
    for bad in (-1, float("inf"), "5", True):
        with pytest.raises(InvalidArguments, match=r"wait\(timeout=…\)") as exc:
            handle.wait(timeout=bad)
        assert exc.value.argument == "timeout"
    for bad in (0, -1, "1"):
        with pytest.raises(InvalidArguments, match=r"wait\(interval=…\)") as exc:
            handle.wait(timeout=1, interval=bad)
        assert exc.value.argument == "interval"


@pytest.mark.django_db(transaction=True)
def test_await_result_gives_the_result_in_async_code() -> None:
    handle = chain(tasks.wf_value.s(1), tasks.wf_value.s(2)).enqueue()
    run_jobs()
    assert asyncio.run(handle.await_result(timeout=30)) == 2
