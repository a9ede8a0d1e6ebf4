"""Class tasks: the ``Task`` base class (a dataclass whose fields are the arguments and
whose ``run(ctx)`` does the work), the ``ClassTask`` registered for each subclass,
``instance.using(...)`` (``BoundTask``), and ``enqueue_many`` of instances in one
transaction.

This layer knows nothing of the database: it hands requests to ``task.submit``.
Function tasks are :mod:`~django_jobqueue.task.functions`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from django_jobqueue import allocations
from django_jobqueue.errors import (
    EnqueueError,
    InvalidArguments,
    InvalidPayload,
    UnknownKind,
)
from django_jobqueue.rules.backoff import Backoff
from django_jobqueue.states import Priority
from django_jobqueue.task.merge import Merge
from django_jobqueue.task.options import (
    Options,
    build_request,
    encode_payload,
)
from django_jobqueue.task.periodic import register_schedule
from django_jobqueue.task.registry import KEY_LIMITS, UNSET, PayloadMismatch, TaskDef, registry
from django_jobqueue.task.signature import Signature, signature
from django_jobqueue.task.submit import items_error, submit, submit_many

if TYPE_CHECKING:
    from django_jobqueue.run.context import Context
    from django_jobqueue.store import EnqueueRequest
    from django_jobqueue.task.handle import JobHandle
    from django_jobqueue.task.merge import Pending


class ClassTask(TaskDef):
    """Registry entry for a ``Task`` subclass; its dataclass fields are the payload."""

    def __init__(self, cls: type[Task]) -> None:
        origin = f"{cls.__module__}.{cls.__qualname__}"
        self._set_options(
            kind=cls.__dict__.get("kind", origin),
            origin=origin,
            queue=cls.queue,
            priority=cls.priority,
            max_failures=cls.max_failures,
            lease=cls.lease,
            backoff=cls.backoff,
            timeout=cls.timeout,
            max_in_flight=cls.max_in_flight,
            rate_limit=cls.rate_limit,
            atomic=cls.atomic,
            asynchronous=inspect.iscoroutinefunction(cls.run),
            **{name: getattr(cls, name) for name in ("key", *KEY_LIMITS)},
        )
        self._set_time_limits(cls.time_limit, cls.soft_time_limit)
        self.cls = self.written_as = cls

    def instance(self, payload: dict[str, Any]) -> Task:
        try:
            return self.cls(**payload)
        except TypeError as exc:
            raise PayloadMismatch(
                f"payload {sorted(payload)} no longer fits {self.cls.__qualname__}: {exc}"
            ) from exc

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The fields of ``cls(*args, **kwargs)`` (not yet JSON)."""
        try:
            instance = self.cls(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{self.kind}: {exc}", kind=self.kind) from exc
        if not dataclasses.is_dataclass(instance):
            raise InvalidPayload(
                f"{self.cls.__qualname__} must be a @dataclass so its fields can be stored",
                kind=self.kind,
            )
        return {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}

    def call(self, payload: dict[str, Any], ctx: Context) -> Any:
        return self.instance(payload).run(ctx)


class Task:
    """Base for dataclass tasks: fields are the arguments, ``run(ctx)`` does the work.

    Class attributes set defaults: ``kind`` (default ``"<module>.<name>"``), ``queue``,
    ``priority``, ``max_failures``, ``lease``, ``backoff``, ``timeout``, ``atomic``, and
    the global limits ``max_in_flight`` and ``rate_limit``; ``cron`` runs the task on a
    schedule (with its fields' defaults). Override ``dedup_key()`` and ``merge()`` to
    merge with a pending job of the same key.
    """

    kind: ClassVar[str]
    queue: ClassVar[str] = "default"
    priority: ClassVar[int] = Priority.NORMAL
    max_failures: ClassVar[Any] = UNSET
    lease: ClassVar[timedelta | None] = None
    timeout: ClassVar[timedelta | None] = None
    time_limit: ClassVar[timedelta | float | None] = None
    soft_time_limit: ClassVar[timedelta | float | None] = None
    backoff: ClassVar[Backoff | None] = None
    max_in_flight: ClassVar[int | None] = None
    rate_limit: ClassVar[str | None] = None
    # Per key: ``key`` a callable of the fields (``staticmethod``), and the limits per key.
    key: ClassVar[Callable[..., Any] | None] = None
    max_in_flight_per_key: ClassVar[int | None] = None
    rate_limit_per_key: ClassVar[str | None] = None
    ordered: ClassVar[bool] = False
    fair: ClassVar[bool] = False
    atomic: ClassVar[bool] = False
    cron: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.run is not Task.run:
            defn = ClassTask(cls)
            registry.register(defn)
            cls.kind = defn.kind
            cron = cls.__dict__.get("cron")
            if cron is not None:
                # Registered once the class is complete: @dataclass runs after this hook,
                # so the fields are read when the first tick needs them (bind is lazy).
                register_schedule(defn, cron, lazy=True)

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
        if "run" not in type(self).__dict__ and getattr(type(self), "kind", None) is None:
            raise UnknownKind(
                f"{type(self).__qualname__} defines no run(self, ctx), so it is not a task",
                kind=type(self).__qualname__,
            )
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

    def s(self) -> Signature:
        """This instance as a workflow step's signature."""
        return BoundTask(self, Options()).s()

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
        return submit(self.request())

    def s(self) -> Signature:
        return signature(self.request())

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
    with allocations.held_off():
        return submit_many(_requests(items, of))


def _requests(items: Iterable[Task | BoundTask], of: type[Task] | None) -> list[EnqueueRequest]:
    """Each item's request; the error of the first bad one, naming it."""
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
            raise items_error(index, exc) from exc
    return requests
