"""Function tasks: the ``@task`` decorator, the ``FunctionTask`` it registers, and
``task.using(...)`` (``BoundCall``): a call turned into a validated ``EnqueueRequest``
and, at run time, a stored payload turned back into the call.

This layer knows nothing of the database: it hands requests to ``task.submit``.
Definitions are kept in :mod:`~django_jobqueue.task.registry`; class tasks are
:mod:`~django_jobqueue.task.classes`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar, overload

from django_jobqueue import allocations, validation
from django_jobqueue.errors import (
    EnqueueError,
    InvalidArguments,
    InvalidOption,
)
from django_jobqueue.rules.backoff import Backoff
from django_jobqueue.states import Priority
from django_jobqueue.task.options import (
    Options,
    build_request,
    job_key,
    payload_encoder,
    waiting_key,
)
from django_jobqueue.task.periodic import periodic
from django_jobqueue.task.registry import KEY_LIMITS, UNSET, PayloadMismatch, TaskDef, registry
from django_jobqueue.task.signature import Signature, signature
from django_jobqueue.task.submit import items_error, submit, submit_checked, submit_many

if TYPE_CHECKING:
    from django_jobqueue.run.context import Context
    from django_jobqueue.store import EnqueueRequest
    from django_jobqueue.task.handle import JobHandle


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
        timeout: timedelta | None = None,
        time_limit: timedelta | float | None = None,
        soft_time_limit: timedelta | float | None = None,
        takes_context: bool = False,
        max_in_flight: int | None = None,
        rate_limit: str | None = None,
        atomic: bool = False,
        **keyed: Any,  # key, max_in_flight_per_key, rate_limit_per_key, ordered, fair
    ) -> None:
        origin = f"{func.__module__}.{func.__qualname__}"
        self._set_options(
            kind=origin if kind is None else kind,
            origin=origin,
            queue=queue,
            priority=priority,
            max_failures=max_failures,
            lease=lease,
            backoff=backoff,
            timeout=timeout,
            max_in_flight=max_in_flight,
            rate_limit=rate_limit,
            atomic=atomic,
            asynchronous=inspect.iscoroutinefunction(func),
            **keyed,
        )
        self._set_time_limits(time_limit, soft_time_limit)
        self.func = self.written_as = func
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
        self,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        encoder: Callable[[dict[str, Any]], str] | None = None,
    ) -> tuple[dict[str, Any], str]:
        """The payload of a call and its JSON text (through ``encoder``, this kind's
        ``payload_encoder``, when a bulk enqueue made one for all of its items)."""
        encode = payload_encoder(self.kind) if encoder is None else encoder
        if not args and self._binds_as_is(kwargs):
            # The bulk API's usual case: no signature.bind needed.
            given = dict(kwargs)
            return given, encode(given)
        payload = self.bind(args, dict(kwargs))
        return payload, encode(payload)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Bind a call to the signature: parameter names to values (not yet JSON)."""
        unexpected = validation.unexpected_keywords(self.signature, kwargs)
        if unexpected:
            raise InvalidArguments(f"{self.kind}{self.signature}: {unexpected}", kind=self.kind)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{self.kind}{self.signature}: {exc}", kind=self.kind) from exc
        payload: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if self.signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
                value = list(value)
            payload[name] = value
        return payload

    def _binds_as_is(self, named: Mapping[str, Any]) -> bool:
        """Whether keyword arguments bind to themselves: the parameters are all plain and
        ``named`` names every required one and nothing else."""
        if self._keywords is None:
            return False
        allowed, required = self._keywords
        names = named.keys()
        return names <= allowed and required <= names

    def _unbind(self, payload: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self._binds_as_is(payload):
            return (), payload  # the call's keyword arguments as they are, no bind per run
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

    def call(self, payload: dict[str, Any], ctx: Context) -> Any:
        args, kwargs = self._unbind(payload)
        if self.takes_context:
            args = (ctx, *args)
        return self.func(*args, **kwargs)

    def using(self, **options: Any) -> BoundCall:
        """Enqueue with overrides: ``add.using(delay=timedelta(minutes=5)).enqueue(1, 2)``."""
        return BoundCall(self, Options.build(**options))

    def enqueue(self, *args: Any, **kwargs: Any) -> JobHandle:
        """Enqueue a call; inside ``transaction.atomic()`` it commits with the caller's data."""
        return BoundCall(self, Options()).enqueue(*args, **kwargs)

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        """A signature of a call (validated as enqueue validates it), for a workflow."""
        return BoundCall(self, Options()).s(*args, **kwargs)

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
        return submit(build_request(self.defn, payload, self.options, payload_json=text))

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        payload, text = self.defn.encode(args, kwargs)
        return signature(build_request(self.defn, payload, self.options, payload_json=text))

    def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[JobHandle]:
        """Enqueue one job per item (a dict of keyword arguments), all in one transaction
        (joining the caller's), every item checked as ``enqueue`` checks it: if one is
        bad, its error (naming it) is raised and nothing of the batch is written.
        Returns the handles in order.

        A list (or any sized collection) of a task whose options the store can stream
        (``store.streamable``) is checked as it is written: the server inserts the rows of
        the items checked while the next ones are, and a bad item rolls the batch back.
        Other batches are checked whole before the first row is sent."""
        # The options are the same for every item: resolved once, copied per item, and
        # so are the payload's limits.
        one = build_request(self.defn, {}, self.options, keyed=False)
        checked = self._checked(items, one)
        with allocations.held_off():
            if isinstance(items, Sized):
                return submit_checked(one, checked, len(items))
            return submit_many(list(checked))

    def _checked(
        self, items: Iterable[Mapping[str, Any]], one: EnqueueRequest
    ) -> Iterator[EnqueueRequest]:
        """Each item's request, made from the batch's ``one`` as it is read; the error
        of the first bad item, naming it."""
        kind = self.defn.kind
        encoder = payload_encoder(kind)
        for index, item in enumerate(items):
            if type(item) is not dict and not isinstance(item, Mapping):  # a dict: no ABC
                raise InvalidArguments(
                    f"item {index}: {kind} takes a dict of keyword arguments, "
                    f"not {type(item).__name__}",
                    kind=kind,
                    index=index,
                )
            try:
                payload, text = self.defn.encode((), item, encoder)
            except EnqueueError as exc:
                raise items_error(index, exc) from exc
            key = (
                one.job_key if self.defn.key is None else job_key(self.defn, payload, self.options)
            )
            if one.while_running == "wait" and one.dedup_key is not None:
                try:
                    key = waiting_key(self.defn, key, one.dedup_key)
                except EnqueueError as exc:
                    raise items_error(index, exc) from exc
            yield one.varied(payload, text, key)


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
    timeout: timedelta | None = ...,
    time_limit: timedelta | float | None = ...,
    soft_time_limit: timedelta | float | None = ...,
    takes_context: bool = ...,
    max_in_flight: int | None = ...,
    rate_limit: str | None = ...,
    atomic: bool = ...,
    cron: str | None = ...,
    **keyed: Any,  # key, max_in_flight_per_key, rate_limit_per_key, ordered, fair
) -> Callable[[F], FunctionTask]: ...


def task(func: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Register a function as a task: ``@task`` or ``@task(priority=..., queue=...)``.

    ``cron="*/5 * * * *"`` also runs it on that schedule (no arguments, the project's
    time zone); :func:`~django_jobqueue.task.periodic` takes arguments and more options.
    """

    cron = options.pop("cron", None)
    known = set(inspect.signature(FunctionTask.__init__).parameters) - {"self", "func", "keyed"}
    known.update(("cron", "key", *KEY_LIMITS))
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidOption(
            f"Unknown task option(s): {', '.join(unknown)}. Known: {', '.join(sorted(known))}",
            option=unknown[0],
        )

    def register(fn: Callable[..., Any]) -> FunctionTask:
        defn = FunctionTask(fn, **options)
        registry.register(defn)
        if cron is not None:
            periodic(defn, cron)
        return defn

    if func is not None:
        return register(func)
    return register
