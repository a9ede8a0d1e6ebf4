"""Tasks: the ``Task`` base class, the ``@task`` decorator and the registry of kinds.

This layer knows nothing of the database. It turns a call into a validated
``EnqueueRequest`` (kind, JSON payload, options) and hands it to ``store``; at run
time it turns a stored payload back into a call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

from . import conf
from .backoff import Backoff
from .errors import (
    DuplicateKind,
    EnqueueError,
    InvalidArguments,
    InvalidOption,
    InvalidPayload,
    MergeError,
    UnknownKind,
)
from .lifecycle import Policy
from .outcomes import Merge
from .states import Priority

if TYPE_CHECKING:
    from .context import Context
    from .handle import JobHandle, Pending
    from .models import Job
    from .store import EnqueueRequest, MergePlan

UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()


class PayloadMismatch(Exception):
    """A stored payload no longer fits the task's code (it changed since enqueue)."""


def check_json(name: str, value: Any, *, kind: str) -> None:
    """Raise InvalidPayload naming ``name`` unless ``value`` survives a JSON round trip."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(
            f"{kind}: argument {name!r} is not JSON-serialisable ({exc})",
            kind=kind,
            argument=name,
        ) from exc


def encode_payload(payload: dict[str, Any], *, kind: str) -> str:
    """The payload as JSON text, encoded once; a value that cannot be is named."""
    try:
        return json.dumps(payload, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        for name, value in payload.items():
            check_json(name, value, kind=kind)
        raise


class TaskDef:
    """Registry entry: a kind, its default options, and how to run a stored payload."""

    kind: str
    queue: str
    priority: int
    max_failures: int | None  # UNSET: the setting's default
    lease: timedelta | None
    backoff: Backoff | None
    origin: str

    def _set_options(
        self,
        *,
        kind: str,
        origin: str,
        queue: str,
        priority: int,
        max_failures: Any,
        lease: timedelta | None,
        backoff: Backoff | None,
    ) -> None:
        validate_priority(priority)
        validate_queue(queue)
        if (
            max_failures is not UNSET
            and max_failures is not None
            and (
                isinstance(max_failures, bool)
                or not isinstance(max_failures, int)
                or max_failures < 1
            )
        ):
            raise InvalidOption(f"{kind}: max_failures must be a positive int or None")
        if lease is not None and (not isinstance(lease, timedelta) or lease <= timedelta(0)):
            raise InvalidOption(f"{kind}: lease must be a positive timedelta")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise InvalidOption(f"{kind}: backoff must be a Backoff(...)")
        self.kind = kind
        self.origin = origin
        self.queue = queue
        self.priority = int(priority)
        self.max_failures = max_failures
        self.lease = lease
        self.backoff = backoff

    def execute(self, payload: dict[str, Any], ctx: Context) -> Any:
        raise NotImplementedError

    def instance(self, payload: dict[str, Any]) -> Task | None:
        """The typed task for a payload (class-based tasks only)."""
        return None

    def policy(self) -> Policy:
        default = conf.get().policy()
        backoff = self.backoff or Backoff()
        return dataclasses.replace(
            default,
            max_failures=default.max_failures if self.max_failures is UNSET else self.max_failures,
            lease=self.lease or default.lease,
            backoff_base=default.backoff_base if backoff.base is None else backoff.base,
            backoff_cap=default.backoff_cap if backoff.cap is None else backoff.cap,
        )


def _run_maybe_async(value: Any) -> Any:
    if inspect.isawaitable(value):

        async def _await() -> Any:
            return await value

        return asyncio.run(_await())
    return value


class Registry:
    """Kinds to task definitions; a kind claimed by two different tasks is an error."""

    def __init__(self) -> None:
        self._by_kind: dict[str, TaskDef] = {}

    def register(self, defn: TaskDef) -> None:
        existing = self._by_kind.get(defn.kind)
        if existing is not None and existing.origin != defn.origin:
            raise DuplicateKind(
                f"Task kind {defn.kind!r} is defined twice: by {existing.origin} and by "
                f"{defn.origin}. Give one of them another kind=...",
                kind=defn.kind,
            )
        self._by_kind[defn.kind] = defn

    def get(self, kind: str) -> TaskDef:
        try:
            return self._by_kind[kind]
        except KeyError:
            raise UnknownKind(
                f"No task is registered under kind {kind!r}; is its tasks.py in an installed app?",
                kind=kind,
            ) from None

    def find(self, kind: str) -> TaskDef | None:
        return self._by_kind.get(kind)

    def kinds(self) -> list[str]:
        return sorted(self._by_kind)

    def leases(self) -> dict[str, timedelta]:
        """The kinds whose task sets its own lease (the rest take the setting)."""
        return {d.kind: d.lease for d in self._by_kind.values() if d.lease is not None}

    def unregister(self, kind: str) -> None:
        self._by_kind.pop(kind, None)

    def __contains__(self, kind: object) -> bool:
        return kind in self._by_kind

    def __iter__(self) -> Iterator[TaskDef]:
        return iter(list(self._by_kind.values()))


registry = Registry()


def policy_for(kind: str) -> Policy:
    """The failure/lease policy for ``kind``; settings defaults for kinds this process lacks."""
    defn = registry.find(kind)
    return defn.policy() if defn is not None else conf.get().policy()


# --- enqueue options ----------------------------------------------------------------------


def validate_priority(priority: Any) -> int:
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or priority not in Priority.values
    ):
        raise InvalidOption(
            f"priority must be one of {sorted(Priority.values)} (Priority.HIGH/NORMAL/LOW), "
            f"got {priority!r}",
            option="priority",
        )
    return int(priority)


def validate_queue(queue: Any) -> str:
    if not isinstance(queue, str) or not queue or len(queue) > 100:
        raise InvalidOption(
            f"queue must be a non-empty string of at most 100 characters, got {queue!r}",
            option="queue",
        )
    return queue


def _validate_key(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 255:
        raise InvalidOption(
            f"{name} must be a non-empty string of at most 255 characters, got {value!r}",
            option=name,
        )
    return value


@dataclass(frozen=True)
class Options:
    """Per-enqueue overrides set with ``.using(...)``."""

    priority: int | None = None
    queue: str | None = None
    delay: timedelta | None = None
    run_at: datetime | None = None
    idempotency_key: str | None = None

    @classmethod
    def build(cls, base: Options | None = None, **given: Any) -> Options:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise InvalidOption(
                f"Unknown enqueue option(s): {', '.join(unknown)}. "
                f"Known: {', '.join(sorted(known))}",
                option=unknown[0],
            )
        values = {**dataclasses.asdict(base or cls()), **given}
        if values["priority"] is not None:
            values["priority"] = validate_priority(values["priority"])
        if values["queue"] is not None:
            validate_queue(values["queue"])
        delay = values["delay"]
        if delay is not None:
            if isinstance(delay, bool) or not isinstance(delay, int | float | timedelta):
                raise InvalidOption(
                    f"delay must be a timedelta or seconds, got {delay!r}", option="delay"
                )
            if not isinstance(delay, timedelta):
                delay = timedelta(seconds=delay)
            if delay < timedelta(0):
                raise InvalidOption(f"delay must not be negative, got {delay}", option="delay")
            values["delay"] = delay
        run_at = values["run_at"]
        if run_at is not None:
            if not isinstance(run_at, datetime) or run_at.tzinfo is None:
                raise InvalidOption(
                    f"run_at must be a timezone-aware datetime, got {run_at!r}", option="run_at"
                )
            if delay is not None and "delay" in given and "run_at" in given:
                raise InvalidOption("give delay or run_at, not both", option="run_at")
        values["idempotency_key"] = _validate_key("idempotency_key", values["idempotency_key"])
        return cls(**values)


def build_request(
    defn: TaskDef,
    payload: dict[str, Any],
    options: Options,
    task: Task | None = None,
    payload_json: str | None = None,
) -> EnqueueRequest:
    """The storage layer's request for one job; a class task with a dedup key brings
    its merge decision along as a callable."""
    from .store import EnqueueRequest

    dedup_key = None
    if task is not None:
        dedup_key = _validate_key("dedup_key()", task.dedup_key())
    return EnqueueRequest(
        kind=defn.kind,
        payload=payload,
        queue=options.queue or defn.queue,
        priority=defn.priority if options.priority is None else options.priority,
        delay=options.delay,
        run_at=options.run_at,
        idempotency_key=options.idempotency_key,
        dedup_key=dedup_key,
        merge=_merger(task, payload) if task is not None and dedup_key is not None else None,
        payload_json=payload_json,
    )


def _merger(task: Task, payload: dict[str, Any]) -> Callable[[Job], MergePlan | None]:
    """How ``task`` merges into a pending candidate row: the task's own ``merge()``,
    checked, as a plan for the storage layer (None: insert independently)."""

    def decide(candidate: Job) -> MergePlan | None:
        from . import store
        from .handle import Pending

        kind = task.kind
        try:
            existing = registry.get(kind).instance(candidate.payload)
        except Exception as exc:
            raise MergeError(
                f"{kind}: pending job {candidate.id} has a payload the task no longer "
                f"accepts ({exc})",
                kind=kind,
                job_id=candidate.id,
            ) from exc
        assert existing is not None
        pending = Pending(
            job_id=candidate.id,
            task=existing,
            carry=dict(candidate.carry or {}),
            run_count=candidate.run_count,
            priority=candidate.priority,
            journal=store.journal(job_id=candidate.id),
        )
        try:
            decision = task.merge(pending)
        except Exception as exc:
            raise MergeError(
                f"{kind}.merge() raised {type(exc).__name__}: {exc}", kind=kind
            ) from exc
        if not isinstance(decision, Merge):
            raise MergeError(
                f"{kind}.merge() must return a Merge decision, got {decision!r}", kind=kind
            )
        if decision.action == "independent":
            return None
        if decision.action == "keep":
            return store.MergePlan("keep")
        if decision.action == "replace":
            return store.MergePlan("replace", payload=payload)
        new = decision.task
        if not isinstance(new, Task) or new.kind != kind:
            raise MergeError(f"{kind}: Merge.with_() needs a {kind} task, got {new!r}", kind=kind)
        if decision.carry is not None:
            check_json("carry", decision.carry, kind=kind)
        return store.MergePlan("with", payload=new.to_payload(), carry=decision.carry)

    return decide


def _submit(request: EnqueueRequest) -> JobHandle:
    # Imported here so that the task layer stays free of the database at import time.
    from . import store
    from .handle import JobHandle

    row, disposition = store.enqueue(request)
    return JobHandle(row, disposition)


def _submit_many(requests: list[EnqueueRequest]) -> list[JobHandle]:
    from . import store
    from .handle import JobHandle

    return [JobHandle(row, disposition) for row, disposition in store.enqueue_many(requests)]


def _items_error(index: int, exc: EnqueueError) -> EnqueueError:
    """The same error, its message naming the item of a bulk enqueue that caused it."""
    facts = {**exc.facts, "index": index}
    return type(exc)(f"item {index}: {exc}", **facts)


# --- function tasks -----------------------------------------------------------------------


F = TypeVar("F", bound=Callable[..., Any])


class FunctionTask(TaskDef):
    """A plain (or async) function registered with ``@task``; calling it runs it inline."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        kind: str | None = None,
        queue: str = "default",
        priority: int = Priority.NORMAL,
        max_failures: Any = UNSET,
        lease: timedelta | None = None,
        backoff: Backoff | None = None,
        takes_context: bool = False,
    ) -> None:
        origin = f"{func.__module__}.{func.__qualname__}"
        self._set_options(
            kind=kind or origin,
            origin=origin,
            queue=queue,
            priority=priority,
            max_failures=max_failures,
            lease=lease,
            backoff=backoff,
        )
        self.func = func
        self.takes_context = takes_context
        signature = inspect.signature(func)
        params = list(signature.parameters.values())
        if takes_context:
            if not params:
                raise InvalidOption(f"{self.kind}: takes_context=True needs a first ctx parameter")
            params = params[1:]
        self.signature = signature.replace(parameters=params)
        plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        self._keywords: tuple[frozenset[str], frozenset[str]] | None = (
            (
                frozenset(p.name for p in params),
                frozenset(p.name for p in params if p.default is inspect.Parameter.empty),
            )
            if all(p.kind in plain for p in params)
            else None
        )
        self.__name__ = func.__name__
        self.__qualname__ = func.__qualname__
        self.__module__ = func.__module__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<task {self.kind}>"

    def payload(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Bind a call to the signature; the payload maps parameter names to values."""
        return self.encode(args, kwargs)[0]

    def encode(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[dict[str, Any], str]:
        """The payload of a call and its JSON text."""
        if not args and self._keywords is not None:
            # Keyword arguments that name every required parameter and nothing else
            # bind to themselves (the bulk API's usual case): no signature.bind needed.
            allowed, required = self._keywords
            names = kwargs.keys()
            if names <= allowed and required <= names:
                given = dict(kwargs)
                return given, encode_payload(given, kind=self.kind)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{self.kind}{self.signature}: {exc}", kind=self.kind) from exc
        payload: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if self.signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
                value = list(value)
            payload[name] = value
        return payload, encode_payload(payload, kind=self.kind)

    def _unbind(self, payload: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        params = self.signature.parameters
        unknown = sorted(set(payload) - set(params))
        if unknown:
            raise PayloadMismatch(
                f"payload has argument(s) {', '.join(unknown)} that {self.kind}{self.signature} "
                "no longer takes"
            )
        ordered = {name: payload[name] for name in params if name in payload}
        bound = inspect.BoundArguments(self.signature, ordered)
        try:
            self.signature.bind(*bound.args, **bound.kwargs)
        except TypeError as exc:
            raise PayloadMismatch(
                f"payload {sorted(payload)} no longer fits {self.kind}{self.signature}: {exc}"
            ) from exc
        return bound.args, bound.kwargs

    def execute(self, payload: dict[str, Any], ctx: Context) -> Any:
        args, kwargs = self._unbind(payload)
        if self.takes_context:
            args = (ctx, *args)
        return _run_maybe_async(self.func(*args, **kwargs))

    def using(self, **options: Any) -> BoundCall:
        """Enqueue with overrides: ``add.using(delay=timedelta(minutes=5)).enqueue(1, 2)``."""
        return BoundCall(self, Options.build(**options))

    def enqueue(self, *args: Any, **kwargs: Any) -> JobHandle:
        """Enqueue a call; inside ``transaction.atomic()`` it commits with the caller's data."""
        return BoundCall(self, Options()).enqueue(*args, **kwargs)

    def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[JobHandle]:
        """Enqueue one job per item, each a dict of keyword arguments, in one transaction."""
        return BoundCall(self, Options()).enqueue_many(items)


class BoundCall:
    """A function task with enqueue options applied."""

    def __init__(self, defn: FunctionTask, options: Options) -> None:
        self.defn = defn
        self.options = options

    def using(self, **options: Any) -> BoundCall:
        return BoundCall(self.defn, Options.build(self.options, **options))

    def enqueue(self, *args: Any, **kwargs: Any) -> JobHandle:
        payload, text = self.defn.encode(args, kwargs)
        return _submit(build_request(self.defn, payload, self.options, payload_json=text))

    def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[JobHandle]:
        """Enqueue one job per item (a dict of keyword arguments): every item is checked
        before anything is written, and all are written in one transaction (joining the
        caller's). Returns the handles in order."""
        kind = self.defn.kind
        # The options are the same for every item: resolved once, copied per item.
        one = build_request(self.defn, {}, self.options)
        request = type(one)
        requests = []
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidArguments(
                    f"{kind}: item {index} must be a dict of keyword arguments, "
                    f"not {type(item).__name__}",
                    kind=kind,
                    index=index,
                )
            try:
                payload, text = self.defn.encode((), item)
            except EnqueueError as exc:
                raise _items_error(index, exc) from exc
            requests.append(
                request(
                    one.kind,
                    payload,
                    one.queue,
                    one.priority,
                    one.delay,
                    one.run_at,
                    one.idempotency_key,
                    payload_json=text,
                )
            )
        return _submit_many(requests)


@overload
def task(func: F, /) -> FunctionTask: ...


@overload
def task(
    *,
    kind: str | None = ...,
    queue: str = ...,
    priority: int = ...,
    max_failures: int | None = ...,
    lease: timedelta | None = ...,
    backoff: Backoff | None = ...,
    takes_context: bool = ...,
) -> Callable[[F], FunctionTask]: ...


def task(func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a function as a task: ``@task`` or ``@task(priority=..., queue=...)``."""

    def register(fn: Callable[..., Any]) -> FunctionTask:
        defn = FunctionTask(fn, **options)
        registry.register(defn)
        return defn

    if func is not None:
        return register(func)
    return register


# --- class tasks --------------------------------------------------------------------------


class ClassTask(TaskDef):
    """Registry entry for a ``Task`` subclass; its dataclass fields are the payload."""

    def __init__(self, cls: type[Task]) -> None:
        origin = f"{cls.__module__}.{cls.__qualname__}"
        self._set_options(
            kind=cls.__dict__.get("kind") or origin,
            origin=origin,
            queue=cls.queue,
            priority=cls.priority,
            max_failures=cls.max_failures,
            lease=cls.lease,
            backoff=cls.backoff,
        )
        self.cls = cls

    def instance(self, payload: dict[str, Any]) -> Task:
        try:
            return self.cls(**payload)
        except TypeError as exc:
            raise PayloadMismatch(
                f"payload {sorted(payload)} no longer fits {self.cls.__qualname__}: {exc}"
            ) from exc

    def execute(self, payload: dict[str, Any], ctx: Context) -> Any:
        return _run_maybe_async(self.instance(payload).run(ctx))


class Task:
    """Base for dataclass tasks: fields are the arguments, ``run(ctx)`` does the work.

    Class attributes set defaults: ``kind`` (default ``"<module>.<name>"``), ``queue``,
    ``priority``, ``max_failures``, ``lease`` and ``backoff``. Override ``dedup_key()``
    and ``merge()`` to merge with a pending job of the same key.
    """

    kind: ClassVar[str]
    queue: ClassVar[str] = "default"
    priority: ClassVar[int] = Priority.NORMAL
    max_failures: ClassVar[Any] = UNSET
    lease: ClassVar[timedelta | None] = None
    backoff: ClassVar[Backoff | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.run is not Task.run:
            defn = ClassTask(cls)
            registry.register(defn)
            cls.kind = defn.kind

    def run(self, ctx: Context) -> Any:
        raise NotImplementedError(f"{type(self).__qualname__} must define run(self, ctx)")

    def dedup_key(self) -> str | None:
        """Jobs of this kind with the same key are merge candidates; None never merges."""
        return None

    def merge(self, existing: Pending) -> Merge:
        """Decide how this incoming task merges with a pending job of the same key."""
        return Merge.keep()

    def to_payload(self) -> dict[str, Any]:
        return self.encode()[0]

    def encode(self) -> tuple[dict[str, Any], str]:
        """The payload (the dataclass fields) and its JSON text."""
        if not dataclasses.is_dataclass(self):
            raise InvalidPayload(
                f"{type(self).__qualname__} must be a @dataclass so its fields can be stored",
                kind=self.kind,
            )
        payload = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return payload, encode_payload(payload, kind=self.kind)

    def _definition(self) -> ClassTask:
        defn = registry.get(self.kind)
        if not isinstance(defn, ClassTask) or defn.cls is not type(self):
            raise UnknownKind(
                f"{type(self).__qualname__} is not the task registered as {self.kind!r}",
                kind=self.kind,
            )
        return defn

    def using(self, **options: Any) -> BoundTask:
        return BoundTask(self, Options.build(**options))

    def enqueue(self) -> JobHandle:
        return BoundTask(self, Options()).enqueue()

    @classmethod
    def enqueue_many(cls, items: Iterable[Task | BoundTask]) -> list[JobHandle]:
        """Enqueue instances of this task (or ``instance.using(...)``) in one transaction."""
        return enqueue_many(items, of=cls)


class BoundTask:
    """A task instance with enqueue options applied."""

    def __init__(self, task: Task, options: Options) -> None:
        self.task = task
        self.options = options

    def using(self, **options: Any) -> BoundTask:
        return BoundTask(self.task, Options.build(self.options, **options))

    def enqueue(self) -> JobHandle:
        return _submit(self.request())

    def request(self) -> EnqueueRequest:
        defn = self.task._definition()
        payload, text = self.task.encode()
        return build_request(defn, payload, self.options, task=self.task, payload_json=text)


def enqueue_many(
    items: Iterable[Task | BoundTask], *, of: type[Task] | None = None
) -> list[JobHandle]:
    """Enqueue ``Task`` instances (or ``instance.using(...)``) in one transaction.

    Every item is checked before anything is written; a bad one raises an error naming
    its index. Returns the handles in order.
    """
    requests = []
    for index, item in enumerate(items):
        bound = BoundTask(item, Options()) if isinstance(item, Task) else item
        if not isinstance(bound, BoundTask) or (of is not None and not isinstance(bound.task, of)):
            wanted = of.__qualname__ if of is not None else "Task"
            raise InvalidArguments(
                f"item {index} must be a {wanted} instance, not {type(item).__name__}",
                kind=of.kind if of is not None else "",
                index=index,
            )
        try:
            requests.append(bound.request())
        except EnqueueError as exc:
            raise _items_error(index, exc) from exc
    return _submit_many(requests)


def enqueue(task_or_kind: Task | FunctionTask | str, *args: Any, **kwargs: Any) -> JobHandle:
    """Enqueue a ``Task`` instance, a ``@task`` function with arguments, or a kind by name."""
    if isinstance(task_or_kind, Task):
        if args or kwargs:
            raise InvalidArguments(
                "enqueue(task_instance) takes no further arguments; set them on the instance",
                kind=task_or_kind.kind,
            )
        return task_or_kind.enqueue()
    if isinstance(task_or_kind, FunctionTask):
        return task_or_kind.enqueue(*args, **kwargs)
    if isinstance(task_or_kind, str):
        defn = registry.get(task_or_kind)
        if isinstance(defn, FunctionTask):
            return defn.enqueue(*args, **kwargs)
        assert isinstance(defn, ClassTask)
        try:
            instance = defn.cls(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{defn.kind}: {exc}", kind=defn.kind) from exc
        return instance.enqueue()
    raise UnknownKind(
        f"enqueue() takes a Task instance, a @task function or a kind name, not "
        f"{type(task_or_kind).__name__}",
        kind=repr(task_or_kind),
    )
