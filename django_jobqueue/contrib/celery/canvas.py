"""Celery's canvas (signatures, ``|``, ``chain``, ``group``, ``chord``, ``starmap``,
``chunks``) with Celery's semantics, on our workflows.

A canvas is planned into steps first (``plan``): each step knows the steps it runs
after and whether it receives their results (a mutable signature gets its parent's
result as its first argument, a chord's body the list of its members' results in
member order). The plan becomes one ``Workflow`` written in one transaction, so its
joins fire exactly once and the admin draws the graph; or, eagerly
(``task_always_eager``, ``.apply()``), it runs here in order.
"""

from __future__ import annotations

import itertools
import traceback
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django_jobqueue.contrib.celery import request as requests
from django_jobqueue.contrib.celery import states
from django_jobqueue.contrib.celery.calling import check_call
from django_jobqueue.contrib.celery.exceptions import TaskRevokedError, Unsupported
from django_jobqueue.errors import EmptyWorkflow, InvalidArguments


class Signature:
    """One task and its arguments and call options; ``immutable`` ones (``.si()``)
    ignore their parent's result."""

    def __init__(
        self,
        task: Any,
        args: Iterable[Any] = (),
        kwargs: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        *,
        immutable: bool = False,
        **extra: Any,
    ) -> None:
        self._task = task
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.options = {**(options or {}), **extra}
        self.immutable = immutable

    @property
    def task(self) -> Any:
        if isinstance(self._task, str):
            from django_jobqueue.contrib.celery.runner import CeleryTaskDef
            from django_jobqueue.task.registry import registry

            defn = registry.get(self._task)
            if not isinstance(defn, CeleryTaskDef):
                raise InvalidArguments(
                    f"{self._task!r} is not a Celery-style task (define it with "
                    "@shared_task or @app.task to put it in a canvas)",
                    kind=self._task,
                )
            self._task = defn.task
        return self._task

    @property
    def name(self) -> str:
        return self._task if isinstance(self._task, str) else self._task.name

    def clone(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None, **opts: Any
              ) -> Signature:  # fmt: skip
        """A copy with ``args`` before its own (as a parent's result comes), ``kwargs``
        and options merged over its own."""
        return Signature(
            self._task,
            (*args, *self.args),
            {**self.kwargs, **(kwargs or {})},
            {**self.options, **opts},
            immutable=self.immutable,
        )

    def set(self, immutable: bool | None = None, **options: Any) -> Signature:
        if immutable is not None:
            self.immutable = immutable
        check_call(self.name, {k: v for k, v in options.items() if k != "link"})
        self.options.update(options)
        return self

    def __or__(self, other: Any) -> Any:
        if isinstance(other, group | chord):
            return chain(self, other)
        if isinstance(other, chain):
            return chain(self, *other.tasks)
        if isinstance(other, Signature):
            return chain(self, other)
        return NotImplemented

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:  # fmt: skip
        sig = self.clone(args, kwargs, **options)
        if sig.task.owner.conf["task_always_eager"]:
            return sig.apply()
        link = sig.options.pop("link", None)
        if link is not None:
            links = list(link) if isinstance(link, list | tuple) else [link]
            after = links[0] if len(links) == 1 else group(links)
            return enqueue(chain(sig, after), result_of=0)
        return enqueue(sig)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the task here with the signature's arguments after ``args``."""
        sig = self.clone(args, kwargs)
        return sig.task(*sig.args, **sig.kwargs)

    def apply(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
              **options: Any) -> Any:  # fmt: skip
        return run_eagerly(self.clone(args, kwargs, **options))

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(parts)}){'' if not self.immutable else ' (immutable)'}"


def _flatten(tasks: tuple[Any, ...]) -> list[Any]:
    if len(tasks) == 1 and not isinstance(tasks[0], Signature | Canvas):
        return list(tasks[0])
    return list(tasks)


class Canvas:
    """What ``chain``, ``group`` and ``chord`` share."""

    options: dict[str, Any]

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:  # fmt: skip
        """Enqueue it all as one workflow; ``options`` (and the canvas's own) apply to
        each task that does not set them itself, as in Celery."""
        node = copied(self.clone(args, kwargs))
        given = {**self.options, **options}
        tuning = sorted(set(given) & CHORD_TUNING)
        if tuning:
            raise Unsupported(
                f"{type(self).__name__}({tuning[0]}=...): chord unlock tuning does not apply "
                "here: a chord's body is released by the settlement of its last member, in "
                "that transaction; nothing polls for it",
                option=tuning[0],
            )
        for sig in signatures(node):
            check_call(sig.name, {k: v for k, v in given.items() if k != "link"})
            sig.options = {**given, **sig.options}
        if node.eager():
            return node.apply()
        return enqueue(node)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
              **options: Any) -> Any:  # fmt: skip
        return run_eagerly(self.clone(args, kwargs))

    def clone(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def eager(self) -> bool:
        first = next(iter(signatures(self)), None)
        return first is not None and bool(first.task.owner.conf["task_always_eager"])

    def set(self, **options: Any) -> Canvas:
        self.options.update(options)
        return self


class chain(Canvas):
    """Each task after the previous one, receiving its result (unless immutable)."""

    def __init__(self, *tasks: Any, **options: Any) -> None:
        self.tasks = _flatten(tasks)
        self.options = options

    def clone(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> chain:
        args = tuple(args)
        if not self.tasks or not (args or kwargs):
            return chain(*self.tasks, **self.options)
        return chain(self.tasks[0].clone(args, kwargs), *self.tasks[1:], **self.options)

    def __or__(self, other: Any) -> Any:
        if isinstance(other, chain):
            return chain(*self.tasks, *other.tasks)
        if isinstance(other, Signature | group | chord):
            return chain(*self.tasks, other)
        return NotImplemented

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.tasks))


class group(Canvas):
    """The tasks at once; the result is their results' list, in order."""

    def __init__(self, *tasks: Any, **options: Any) -> None:
        self.tasks = _flatten(tasks)
        self.options = options

    def clone(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> group:
        args = tuple(args)
        return group(*(t.clone(args, kwargs) for t in self.tasks), **self.options)

    def __or__(self, other: Any) -> Any:
        if isinstance(other, Signature):
            return chord(self.tasks, other)  # Celery: a group then a task is a chord
        if isinstance(other, chain | group):
            return chain(self, other)
        return NotImplemented

    def __len__(self) -> int:
        return len(self.tasks)

    def __repr__(self) -> str:
        return f"group({self.tasks!r})"


class chord(Canvas):
    """A group (the header), then ``body`` with the list of their results, in order."""

    def __init__(self, header: Any, body: Signature | Canvas | None = None, **options: Any) -> None:
        self.header = list(header.tasks if isinstance(header, group) else header)
        self.body = body
        self.options = options

    def __call__(self, body: Any = None, **options: Any) -> Any:
        if isinstance(body, Signature | Canvas):
            return chord(self.header, body, **self.options).apply_async()
        return super().__call__(*(() if body is None else (body,)), **options)

    def clone(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> chord:
        args = tuple(args)
        header = [t.clone(args, kwargs) for t in self.header]
        return chord(header, self.body, **self.options)

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"


# Celery's chord unlock options: refused, the join needs none.
CHORD_TUNING = frozenset({"interval", "max_retries", "propagate", "chord_size"})


def copied(node: Any) -> Any:
    """The canvas with every signature copied (options set on the copy stay there)."""
    if isinstance(node, Signature):
        return node.clone()
    if isinstance(node, chord):
        body = None if node.body is None else copied(node.body)
        return chord([copied(t) for t in node.header], body, **node.options)
    if isinstance(node, chunks):
        return copied(node.group())
    return type(node)(*(copied(t) for t in node.tasks), **node.options)


def signature(varies: Any, *args: Any, **kwargs: Any) -> Signature:
    """``signature("proj.tasks.add", args=(2, 2), kwargs={}, ...)``, or a signature back."""
    if isinstance(varies, Signature):
        return varies.clone()
    immutable = bool(kwargs.pop("immutable", False))
    call_args = args[0] if args else kwargs.pop("args", ())
    call_kwargs = args[1] if len(args) > 1 else kwargs.pop("kwargs", None)
    options = args[2] if len(args) > 2 else kwargs.pop("options", None)
    return Signature(varies, call_args, call_kwargs, {**(options or {}), **kwargs},
                     immutable=immutable)  # fmt: skip


def maybe_signature(value: Any) -> Any:
    return value


def _builtin(name: str) -> Any:
    """``celery.starmap`` or ``celery.map`` (registered with the app module)."""
    from django_jobqueue.task.registry import registry

    return registry.get(name).task  # type: ignore[attr-defined]


def starmap(task: Any, it: Iterable[Iterable[Any]]) -> Signature:
    """One job calling ``task(*args)`` for each ``args`` of ``it``: their results' list."""
    sig: Signature = _builtin("celery.starmap").si(task.name, [list(a) for a in it])
    return sig


def xmap(task: Any, it: Iterable[Any]) -> Signature:
    """One job calling ``task(item)`` for each item: their results' list."""
    sig: Signature = _builtin("celery.map").si(task.name, list(it))
    return sig


class chunks(Canvas):
    """``it`` (argument tuples) cut into parts of ``n``, one ``starmap`` job each, as a
    group: the result is the list of each part's list of results."""

    def __init__(self, task: Any, it: Iterable[Iterable[Any]], n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidArguments(f"chunks: n must be a positive whole number, got {n!r}")
        self.task, self.items, self.n = task, [list(a) for a in it], n
        self.options: dict[str, Any] = {}

    def group(self) -> Canvas:
        parts = [self.items[i : i + self.n] for i in range(0, len(self.items), self.n)]
        return group([starmap(self.task, part) for part in parts])

    def clone(self, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None) -> Canvas:
        return self.group()


# --- planning and enqueueing --------------------------------------------------------


@dataclass
class Step:
    name: str
    sig: Signature
    wait: list[str]  # the steps it runs after
    receive: list[str]  # those whose results come first in its arguments (none: immutable)
    as_list: bool  # those results come as one list (a chord body), not the one result


@dataclass
class Plan:
    steps: list[Step]
    result: Any  # ("one", name) | ("group", [result, ...]) | ("chain", [result, ...])


def signatures(node: Any) -> list[Signature]:
    if isinstance(node, Signature):
        return [node]
    if isinstance(node, chord):
        return [s for t in node.header for s in signatures(t)] + (
            signatures(node.body) if node.body is not None else []
        )
    if isinstance(node, chunks):
        return signatures(node.group())
    return [s for t in node.tasks for s in signatures(t)]


def plan(node: Any) -> Plan:
    steps: list[Step] = []
    counter = itertools.count()

    def walk(node: Any, after: list[str], as_list: bool) -> tuple[list[str], bool, Any]:
        if isinstance(node, Signature):
            name = str(next(counter))
            # An immutable step still waits for its parents: it only ignores their results.
            steps.append(Step(name, node, after, [] if node.immutable else after, as_list))
            return [name], False, ("one", name)
        if isinstance(node, chunks):
            return walk(node.group(), after, as_list)
        if isinstance(node, chord):
            if node.body is None:
                raise InvalidArguments(
                    "chord has no body: chord(header)(body) or chord(header, body)"
                )
            tails, _, head = walk(group(node.header), after, as_list)
            body_tails, body_list, body = walk(node.body, tails, True)
            return body_tails, body_list, ("chain", [head, body])
        if isinstance(node, group):
            members: list[str] = []
            results = []
            for member in node.tasks:
                t, _, r = walk(member, after, as_list)
                members += t
                results.append(r)
            return members, True, ("group", results)
        if isinstance(node, chain):
            results = []
            for member in node.tasks:
                after, as_list, r = walk(member, after, as_list)
                results.append(r)
            return after, as_list, ("chain", results)
        raise InvalidArguments(f"{node!r} is not a signature, chain, group or chord")

    _, _, result = walk(node, [], False)
    if not steps:
        raise EmptyWorkflow(f"{node!r} has no task: nothing to enqueue")
    return Plan(steps, result)


def _shape(node: Any) -> str:
    from django_jobqueue.workflows.graph import WorkflowShape

    if isinstance(node, chord):
        return WorkflowShape.CHORD
    if isinstance(node, group | chunks):
        return WorkflowShape.GROUP
    if isinstance(node, chain) and all(isinstance(t, Signature) for t in node.tasks):
        return WorkflowShape.CHAIN
    return WorkflowShape.WORKFLOW


def enqueue(node: Any, *, result_of: int | None = None) -> Any:
    """Write ``node`` as one workflow (a lone signature as one job) and return its result
    object (``result_of``: the result of that member of a chain instead of its last)."""
    from django_jobqueue.contrib.celery.calling import meta_of, request_for
    from django_jobqueue.contrib.celery.result import AsyncResult, materialize
    from django_jobqueue.task.signature import signature as step_signature
    from django_jobqueue.task.submit import submit
    from django_jobqueue.workflows.graph import Workflow

    def request(step: Step) -> Any:
        sig = step.sig
        options = {k: v for k, v in sig.options.items() if k != "link"}
        meta = meta_of(sig.task, options)
        if step.receive:
            meta.update(parents=step.receive, as_list=step.as_list)
        return request_for(sig.task, list(sig.args), sig.kwargs, options, meta)

    if isinstance(node, Signature):
        handle = submit(request(Step("0", node, [], [], False)))
        return AsyncResult(handle.id, handle=handle)
    found = plan(node)
    wf = Workflow(f"celery {_shape(node)}", shape=_shape(node))
    for step in found.steps:
        wf.add(step_signature(request(step)), name=step.name, after=step.wait)
    written = wf.enqueue()
    ids = {name: h.id for name, h in written.steps.items()}
    result = found.result
    if result_of is not None:
        result = result[1][result_of]
    return materialize(result, ids, group_id=written.id)


# --- eagerly (``apply()``, ``task_always_eager``): each task in plan order, here, its
# retries at once (their delays not waited for), as Celery's eager mode does;
# ``task_eager_propagates`` makes a failure raise.


def _run_one(sig: Any, args: list[Any]) -> Any:
    from django_jobqueue.contrib.celery.result import EagerResult
    from django_jobqueue.contrib.celery.runner import attempt

    task = sig.task
    task.definition.check(args, sig.kwargs)
    task_id = str(uuid.uuid4())
    retries = 0
    while True:
        request = requests.Request(
            id=task_id, retries=retries, args=args, kwargs=dict(sig.kwargs),
            called_directly=False, is_eager=True, task=task.name,
            delivery_info={"is_eager": True},
        )  # fmt: skip
        outcome = attempt(task, request)
        if outcome.end == "success":
            return EagerResult(task_id, outcome.value, states.SUCCESS)
        if outcome.end == "retry":
            retries += 1
            continue
        exc = outcome.exc
        assert exc is not None
        if task.owner.conf["task_eager_propagates"]:
            raise exc
        text = "".join(traceback.format_exception(exc))
        return EagerResult(task_id, exc, states.FAILURE, text)


def run_eagerly(node: Any) -> Any:
    from django_jobqueue.contrib.celery.result import EagerResult, materialize

    if isinstance(node, Signature):
        return _run_one(node, list(node.args))
    found = plan(node)
    done: dict[str, Any] = {}
    for step in found.steps:
        parents = [done[name] for name in step.wait]
        if any(not p.successful() for p in parents):
            done[step.name] = EagerResult(
                str(uuid.uuid4()), TaskRevokedError("a parent failed"), states.REVOKED
            )
            continue
        args = list(step.sig.args)
        if step.receive:
            values = [done[name].result for name in step.receive]
            args = [values if step.as_list else values[0], *args]
        done[step.name] = _run_one(step.sig, args)
    return materialize(found.result, done)
