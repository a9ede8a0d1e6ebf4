"""Workflows written straight through the ORM (a test's shortcut for enqueue and the
engine's settlements): a workflow row, its steps as jobs in given states, its edges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta

from django.utils import timezone

from django_jobqueue.models import Job, StepEdge, Workflow

KIND = "tests.taskapp.tasks.add"
TERMINAL = {"completed", "dead", "cancelled"}


def make_workflow(
    name: str,
    steps: Mapping[str, str],
    edges: Iterable[tuple[str, str]] = (),
    *,
    shape: str = "workflow",
    status: str = "running",
    kind: str = KIND,
) -> tuple[Workflow, dict[str, Job]]:
    """A workflow with a step per ``steps`` item (name: status) and the ``edges``
    (parent name, child name) among them; its counters follow from the statuses."""
    now = timezone.now()
    finished = [s for s in steps.values() if s in TERMINAL]
    wf = Workflow.objects.create(
        name=name,
        shape=shape,
        status=status,
        steps_total=len(steps),
        steps_open=len(steps) - len(finished),
        steps_dead=sum(1 for s in steps.values() if s == "dead"),
        finished_at=now if status != "running" else None,
    )
    jobs = Job.objects.bulk_create(
        [
            Job(
                kind=kind,
                payload={"a": i, "b": 1},
                status=state,
                workflow=wf,
                step_name=step,
                join_when="completed",
                run_count=1 if state in TERMINAL or state == "claimed" else 0,
                finished_at=now if state in TERMINAL else None,
                claimed_by="w:1" if state == "claimed" else "",
                claim_expires_at=now + timedelta(minutes=5) if state == "claimed" else None,
            )
            for i, (step, state) in enumerate(steps.items())
        ],
        batch_size=500,
    )
    by_name = {j.step_name or "": j for j in jobs}
    StepEdge.objects.bulk_create(
        [StepEdge(workflow=wf, parent=by_name[p], child=by_name[c]) for p, c in edges],
        batch_size=500,
    )
    open_parents: dict[str, int] = {}
    for p, c in edges:
        if steps[p] != "completed":
            open_parents[c] = open_parents.get(c, 0) + 1
    for child, n in open_parents.items():
        Job.objects.filter(id=by_name[child].id).update(parents_open=n)
    return wf, {j.step_name or "": j for j in Job.objects.filter(workflow=wf)}


def chord(name: str, members: int, *, dead: int = 0) -> tuple[Workflow, dict[str, Job]]:
    """A chord: ``members`` header steps (the first ``dead`` of them dead, the rest
    completed) and a callback waiting on them all."""
    steps = {f"m{i}": "dead" if i < dead else "completed" for i in range(members)}
    steps["callback"] = "waiting" if not dead else "cancelled"
    edges = [(f"m{i}", "callback") for i in range(members)]
    return make_workflow(name, steps, edges, shape="chord")
