"""Bad input at enqueue: a clear typed error naming what is wrong, and nothing written."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from django_jobqueue import (
    Batch,
    InvalidArguments,
    InvalidOption,
    UnknownKind,
    Workflow,
    WorkflowNotFound,
    chain,
    chord,
    group,
    task,
    workflow,
)
from django_jobqueue.errors import (
    DuplicateStep,
    EmptyWorkflow,
    InvalidJoin,
    UnknownStep,
    WorkflowCycle,
    WorkflowError,
)
from django_jobqueue.models import Job, StepEdge
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.task.registry import registry
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def nothing_written() -> Iterator[None]:
    jobs = Job.objects.count()
    yield
    assert WorkflowRow.objects.count() == 0
    assert StepEdge.objects.count() == 0
    assert Job.objects.count() == jobs


def cycle() -> Workflow:
    wf = Workflow("loop")
    wf.add(tasks.wf_value.s(x=1), name="a", after=["c"])
    wf.add(tasks.wf_value.s(x=2), name="b", after=["a"])
    wf.add(tasks.wf_value.s(x=3), name="c", after=["b"])
    wf.add(tasks.wf_value.s(x=4), name="free")
    return wf


def unknown_after() -> Workflow:
    wf = Workflow("typo")
    wf.add(tasks.wf_value.s(x=1), name="fetch")
    wf.add(tasks.wf_value.s(x=2), name="parse", after=["fecth"])
    return wf


def other_workflows_step() -> Workflow:
    other = Workflow("other")
    ref = other.add(tasks.wf_value.s(x=1), name="a")
    wf = Workflow("this")
    wf.add(tasks.wf_value.s(x=2), name="a")
    wf.add(tasks.wf_value.s(x=3), name="b", after=[ref])
    return wf


def duplicate() -> Workflow:
    wf = Workflow("twice")
    wf.add(tasks.wf_value.s(x=1), name="a")
    wf.add(tasks.wf_value.s(x=2), name="a")
    return wf


def unknown_when() -> Workflow:
    wf = Workflow("when")
    a = wf.add(tasks.wf_value.s(x=1), name="a")
    wf.add(tasks.wf_value.s(x=2), name="b", after=[a], when="succeeded")
    return wf


CASES: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "cycle": (cycle, WorkflowCycle, r"cycle: steps 'a', 'b', 'c'"),
    "unknown after": (unknown_after, UnknownStep, r"'fecth', which is no step"),
    "a step of another workflow": (other_workflows_step, UnknownStep, "another workflow"),
    "duplicate name": (duplicate, DuplicateStep, "two steps named 'a'"),
    "unknown when": (unknown_when, InvalidJoin, "when='succeeded'"),
    "empty workflow": (lambda: Workflow("none"), EmptyWorkflow, "no step"),
    "empty group": (lambda: group([]), EmptyWorkflow, "group 'group' has no member"),
    "empty chord": (lambda: chord([], tasks.wf_total.s()), EmptyWorkflow, "no member"),
    "empty chain": (lambda: chain(), EmptyWorkflow, "no step"),
    "empty batch": (lambda: Batch(on_finish=tasks.wf_total.s()), EmptyWorkflow, "no member"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_workflow_is_a_typed_error_at_enqueue_and_writes_nothing(case: str) -> None:
    build, error, message = CASES[case]
    wf = build()
    with pytest.raises(error, match=message) as caught:
        wf.enqueue()
    assert isinstance(caught.value, WorkflowError)


def test_the_error_names_the_step_at_fault() -> None:
    with pytest.raises(UnknownStep) as caught:
        unknown_after().enqueue()
    assert caught.value.step == "parse"


def test_a_signature_with_arguments_that_do_not_fit_fails_where_it_is_made() -> None:
    with pytest.raises(InvalidArguments, match=r"tests\.wf\.value"):
        tasks.wf_value.s(y=1)
    with pytest.raises(InvalidArguments):
        tasks.wf_value.s(1, 2)
    with pytest.raises(InvalidOption, match="priority"):
        tasks.wf_value.using(priority=99).s(x=1)


def test_a_signature_cannot_carry_an_idempotency_key() -> None:
    with pytest.raises(InvalidOption, match="idempotency_key"):
        tasks.wf_value.using(idempotency_key="k").s(x=1)


def test_a_signature_of_an_unregistered_task_is_refused_at_enqueue() -> None:
    with registry.isolated():

        @task(kind="tests.wf.gone")
        def gone() -> None:
            return None

        sig = gone.s()
    with pytest.raises(UnknownKind, match=r"tests\.wf\.gone"):
        chain(tasks.wf_value.s(x=1), sig).enqueue()


def test_something_that_is_not_a_signature_is_refused() -> None:
    with pytest.raises(InvalidArguments, match="chain member 1 is int"):
        chain(tasks.wf_value.s(x=1), 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments, match=r"a signature \(task.s\(...\)\), not str"):
        Workflow("w").add("tests.wf.value")  # type: ignore[arg-type]


def test_an_unknown_workflow_id_is_workflow_not_found() -> None:
    with pytest.raises(WorkflowNotFound):
        workflow("not-a-uuid")
    with pytest.raises(WorkflowNotFound):
        workflow("01890000-0000-7000-8000-000000000000")


UNSTORABLE_NAMES = {
    "nul": ("a\x00b", "contains a NUL character"),
    "surrogate": ("a\ud800b", "contains a lone surrogate"),
}


@pytest.mark.parametrize("bad", sorted(UNSTORABLE_NAMES))
@pytest.mark.parametrize(
    "make",
    [
        lambda n: Workflow(n),
        lambda n: chain(tasks.wf_value.s(x=1), name=n),
        lambda n: group([tasks.wf_value.s(x=1)], name=n),
        lambda n: chord([tasks.wf_value.s(x=1)], tasks.wf_total.s(), name=n),
        lambda n: Batch(name=n).add(tasks.wf_value.s(x=1)).enqueue(),
    ],
    ids=["workflow", "chain", "group", "chord", "batch"],
)
def test_a_workflow_name_the_database_cannot_store_is_refused_and_the_transaction_goes_on(
    make: Callable[[str], Any], bad: str
) -> None:
    """A NUL or a lone surrogate in a workflow's name, as in a step's: refused by name
    when the workflow is made (PostgreSQL's DataError or psycopg's UnicodeEncodeError at
    ``enqueue()`` before), and the caller's transaction still usable."""
    from django.db import transaction

    name, problem = UNSTORABLE_NAMES[bad]
    with transaction.atomic():
        with pytest.raises(InvalidArguments, match=f"a workflow's name {problem}"):
            make(name)
        assert WorkflowRow.objects.count() == 0


@pytest.mark.parametrize("bad", sorted(UNSTORABLE_NAMES))
def test_a_step_name_the_database_cannot_store_is_refused(bad: str) -> None:
    name, problem = UNSTORABLE_NAMES[bad]
    wf = Workflow("names")
    with pytest.raises(InvalidArguments, match=f"a step name {problem}"):
        wf.add(tasks.wf_value.s(x=1), name=name)
    assert len(wf) == 0
