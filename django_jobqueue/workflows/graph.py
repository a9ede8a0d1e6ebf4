"""Composing signatures: ``Workflow`` (a graph of named steps), and ``chain``, ``group``
and ``chord``, which are workflows of a fixed shape whose steps are named by position
("0", "1", …; a chord's callback is "callback").

Everything is checked before anything is written (names, the steps ``after`` names,
joins, cycles, the signatures themselves), then ``enqueue()`` hands the store the whole
graph to write in the caller's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django_jobqueue import routing, store, validation
from django_jobqueue.errors import (
    DuplicateStep,
    EmptyWorkflow,
    InvalidArguments,
    InvalidJoin,
    UnknownStep,
    WorkflowCycle,
)
from django_jobqueue.states import JoinWhen
from django_jobqueue.store.workflows import StepSpec, enqueue_workflow
from django_jobqueue.task import signalling
from django_jobqueue.task.handle import JobHandle
from django_jobqueue.task.registry import registry
from django_jobqueue.task.signature import Signature
from django_jobqueue.workflows.handle import WorkflowHandle

if TYPE_CHECKING:
    from django_jobqueue.workflows.handle import WorkflowHandle


class WorkflowShape:
    """How a workflow was written (``models.WorkflowShape``'s values; the models are
    not imported here, so that ``django_jobqueue`` imports before Django's apps load)."""

    WORKFLOW = "workflow"
    CHAIN = "chain"
    GROUP = "group"
    CHORD = "chord"
    BATCH = "batch"


# The joins a caller may ask for; ``failed`` is a batch's on_failure's own.
WHENS = (JoinWhen.COMPLETED.value, JoinWhen.FINISHED.value)
NAME_LIMIT = 200


@dataclass(frozen=True)
class StepRef:
    """A step added to a workflow: what ``after=`` takes (or the step's name)."""

    workflow: Workflow = field(repr=False, compare=False)
    name: str


@dataclass
class _Step:
    name: str
    sig: Signature
    after: list[StepRef | str]
    when: str


class Workflow:
    """A graph of steps; ``add`` returns a ``StepRef`` for later steps' ``after``.

    ``output`` (a step's name or ``StepRef``, settable until ``enqueue``) is the step
    whose result is the workflow's (``WorkflowHandle.result``, ``wait()``). Left None,
    it is the workflow's one final step (the one step no other step runs after), if it
    has exactly one; a chain's is its last step, a chord's its callback, and a group's
    result is the list of its members' results, in order."""

    def __init__(
        self,
        name: str = "workflow",
        *,
        shape: str = WorkflowShape.WORKFLOW,
        output: StepRef | str | None = None,
    ) -> None:
        self.name = _checked_name(name, "a workflow's name")
        self.shape = shape
        self.output = output
        self._steps: list[_Step] = []
        self._empty: str | None = None  # why a shape with no member cannot run

    def add(
        self,
        sig: Signature,
        *,
        name: str | None = None,
        after: Iterable[StepRef | str] = (),
        when: str = JoinWhen.COMPLETED,
    ) -> StepRef:
        """Add a step that runs ``sig`` after the steps ``after`` names (handles or names)
        have completed (``when="completed"``) or finished in any way (``"finished"``)."""
        if not isinstance(sig, Signature):
            raise InvalidArguments(
                f"a workflow step is a signature (task.s(...)), not {type(sig).__name__}"
            )
        step = _checked_name(str(len(self._steps)) if name is None else name, "a step name")
        if isinstance(after, StepRef | str):
            after = [after]
        self._steps.append(_Step(step, sig, list(after), when))
        return StepRef(self, step)

    def __len__(self) -> int:
        return len(self._steps)

    def specs(self) -> list[Any]:
        """The steps as the store writes them, after every check (see the module)."""
        if self._empty is not None:
            raise EmptyWorkflow(self._empty)
        if not self._steps:
            raise EmptyWorkflow(f"workflow {self.name!r} has no step: nothing to enqueue")
        index: dict[str, int] = {}
        for i, step in enumerate(self._steps):
            if step.name in index:
                raise DuplicateStep(
                    f"workflow {self.name!r} has two steps named {step.name!r}", step=step.name
                )
            index[step.name] = i
        for step in self._steps:
            registry.get(step.sig.kind)  # UnknownKind: a task no worker could run
        parents = [self._parents(step, index) for step in self._steps]
        _check_acyclic(self.name, [s.name for s in self._steps], parents)
        return [
            StepSpec(name=s.name, request=s.sig.request, parents=tuple(p), when=s.when)
            for s, p in zip(self._steps, parents, strict=True)
        ]

    def _parents(self, step: _Step, index: dict[str, int]) -> list[int]:
        if step.when not in WHENS and not (
            self.shape == WorkflowShape.BATCH and step.when == JoinWhen.FAILED
        ):
            raise InvalidJoin(
                f"step {step.name!r}: when={step.when!r} is not a join; use one of "
                f"{', '.join(map(repr, WHENS))}",
                step=step.name,
            )
        found: dict[int, None] = {}  # in order, each once
        for ref in step.after:
            if isinstance(ref, StepRef):
                if ref.workflow is not self:
                    raise UnknownStep(
                        f"step {step.name!r}: after names step {ref.name!r} of another "
                        f"workflow ({ref.workflow.name!r})",
                        step=step.name,
                    )
                ref = ref.name
            if not isinstance(ref, str) or ref not in index:
                raise UnknownStep(
                    f"step {step.name!r}: after names {ref!r}, which is no step of workflow "
                    f"{self.name!r}",
                    step=step.name,
                )
            found[index[ref]] = None
        return list(found)

    def output_step(self, specs: Sequence[StepSpec]) -> str:
        """The name of the step whose result is the workflow's ("" for none; see the
        class): ``UnknownStep`` when ``output`` names no step of this workflow."""
        output = self.output
        if output is None:
            if self.shape != WorkflowShape.WORKFLOW:
                return ""
            waited_on = {p for spec in specs for p in spec.parents}
            final = [spec.name for i, spec in enumerate(specs) if i not in waited_on]
            return final[0] if len(final) == 1 else ""
        if isinstance(output, StepRef) and output.workflow is self:
            output = output.name
        if not isinstance(output, str) or output not in {spec.name for spec in specs}:
            raise UnknownStep(
                f"workflow {self.name!r}: output names {output!r}, which is no step of it",
                step=str(output),
            )
        return output

    def enqueue(self) -> WorkflowHandle:
        """Write the workflow (joining the caller's transaction, like ``enqueue()``)."""
        return self.enqueue_with()

    def enqueue_with(
        self,
        *,
        last: tuple[str, Signature] | None = None,
        workflow_id: uuid.UUID | None = None,
    ) -> WorkflowHandle:
        """``enqueue``, with ``last`` (a step name and its signature) added after every
        other step has finished in any way, and the workflow given ``workflow_id``: how
        a child workflow is enqueued with the step that tells its parent
        (``run.children``)."""
        specs = self.specs()
        output = self.output_step(specs)  # before ``last``: never the step that tells
        if last is not None:
            step, sig = last
            if any(s.name == step for s in specs):
                raise DuplicateStep(
                    f"workflow {self.name!r} has a step named {step!r}, a name kept for "
                    "the step a child workflow ends with",
                    step=step,
                )
            parents = tuple(range(len(specs)))
            specs.append(
                StepSpec(name=step, request=sig.request, parents=parents, when=JoinWhen.FINISHED)
            )
        root = specs[0].request if specs else None
        database = (
            routing.current()
            if root is None or not routing.several()
            else routing.target(kind=root.kind, queue=root.queue, key=root.job_key)
        )
        with store.on_database(database):  # the whole workflow on its root's database
            wf, rows = enqueue_workflow(
                name=self.name,
                shape=self.shape,
                steps=specs,
                workflow_id=workflow_id,
                output=output,
            )
            handles = [JobHandle(row, "inserted") for row in rows]
            signalling.enqueued([s.request for s in specs], handles)
            return WorkflowHandle(
                wf, {s.name: h for s, h in zip(specs, handles, strict=True)}, database=database
            )

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r} ({self.shape}, {len(self._steps)} steps)>"


def _checked_name(name: Any, what: str) -> str:
    """A workflow's or a step's name as its column stores it: a non-empty string of at
    most ``NAME_LIMIT`` characters with no NUL and no lone surrogate (PostgreSQL refuses
    those; refused here, before any row is written, the caller's transaction untouched)."""
    return validation.bounded_text(name, name=what, error=InvalidArguments, max_length=NAME_LIMIT)


def _check_acyclic(name: str, names: Sequence[str], parents: Sequence[Sequence[int]]) -> None:
    """Raise ``WorkflowCycle`` naming a circle's steps, if the edges have one (Kahn's
    order: whatever never comes free is on or behind a circle)."""
    waiting = [len(p) for p in parents]
    children: list[list[int]] = [[] for _ in names]
    for child, ps in enumerate(parents):
        for p in ps:
            children[p].append(child)
    free = [i for i, n in enumerate(waiting) if n == 0]
    seen = 0
    while free:
        i = free.pop()
        seen += 1
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                free.append(c)
    if seen < len(names):
        stuck = [names[i] for i, n in enumerate(waiting) if n > 0]
        raise WorkflowCycle(
            f"workflow {name!r} has a cycle: steps {', '.join(map(repr, stuck))} wait on "
            "each other",
            step=stuck[0],
        )


def _signatures(what: str, sigs: Iterable[Signature]) -> list[Signature]:
    found = list(sigs)
    for i, sig in enumerate(found):
        if not isinstance(sig, Signature):
            raise InvalidArguments(
                f"{what} member {i} is {type(sig).__name__}, not a signature (task.s(...))",
                index=i,
            )
    return found


def chain(*sigs: Signature, name: str = "chain") -> Workflow:
    """Steps "0", "1", …, each after the previous one completed."""
    wf = Workflow(name, shape=WorkflowShape.CHAIN)
    previous: StepRef | None = None
    for sig in _signatures("chain", sigs):
        previous = wf.add(sig, after=[previous] if previous else [])
    wf.output = previous  # None for an empty chain, which specs() refuses
    return wf


def group(sigs: Iterable[Signature], *, name: str = "group") -> Workflow:
    """Steps "0", "1", … all at once."""
    wf = Workflow(name, shape=WorkflowShape.GROUP)
    for sig in _signatures("group", sigs):
        wf.add(sig)
    if not len(wf):
        wf._empty = f"group {name!r} has no member: nothing to enqueue"
    return wf


def chord(header: Iterable[Signature], callback: Signature, *, name: str = "chord") -> Workflow:
    """Members "0", "1", … at once, then "callback" once every member completed (its
    ``ctx.parents`` maps each member's name to its result)."""
    wf = Workflow(name, shape=WorkflowShape.CHORD)
    members = [wf.add(sig) for sig in _signatures("chord", header)]
    if not members:
        wf._empty = f"chord {name!r} has no member: its callback would wait for nothing"
    wf.output = wf.add(_signatures("chord callback", [callback])[0], name="callback", after=members)
    return wf
