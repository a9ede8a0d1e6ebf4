"""The registry of kinds: each task's definition (kind, default options, how to run a
stored payload) and the failure policy it resolves to.

Knows nothing of the database. ``task`` fills it when a ``@task`` function or a
``Task`` subclass is defined; the worker, the executor and enqueue read it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from asgiref.sync import async_to_sync
from django.conf import settings

from django_jobqueue import conf, validation
from django_jobqueue.errors import DuplicateKind, InvalidOption, UnknownKind
from django_jobqueue.rules.backoff import Backoff
from django_jobqueue.rules.lifecycle import Policy
from django_jobqueue.states import Priority
from django_jobqueue.validation import Rate

logger = logging.getLogger("django_jobqueue")

if TYPE_CHECKING:
    from django_jobqueue.run.context import Context
    from django_jobqueue.task.merge import Mergeable


class Schedule(Protocol):
    """What the registry keeps of a periodic schedule (``periodic.ScheduleDef`` is one):
    enough to refuse a second, different schedule under the same name."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def same_as(self, other: object) -> bool: ...

    def describe(self) -> str: ...


S = TypeVar("S", bound=Schedule)

# The limits per key a task may declare (and JOBQUEUE["LIMITS"] or set_limit set).
KEY_LIMITS = ("max_in_flight_per_key", "rate_limit_per_key", "ordered", "fair")

UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()


class PayloadMismatch(Exception):
    """A stored payload no longer fits the task's code (it changed since enqueue)."""


class TaskDef:
    """Registry entry: a kind, its default options, and how to run a stored payload."""

    kind: str
    queue: str
    priority: int
    max_failures: int | None  # UNSET: the setting's default
    lease: timedelta | None
    backoff: Backoff | None
    timeout: timedelta | None
    atomic: bool
    origin: str
    # The process pool's limits (``runworker --pool process``): past ``time_limit`` the
    # run's child process is killed; at ``soft_time_limit`` SoftTimeLimitExceeded is
    # raised inside the task first.
    time_limit: timedelta | None = None
    soft_time_limit: timedelta | None = None
    # Global limits the task asks for (JOBQUEUE["LIMITS"] and run-time limits win).
    max_in_flight: int | None = None
    rate_limit: Rate | None = None
    # Per-key (issue 23): the job's key from its arguments, and the limits per key.
    key: Callable[..., Any] | None = None
    max_in_flight_per_key: int | None = None
    rate_limit_per_key: Rate | None = None
    ordered: bool = False
    fair: bool = False
    # The function or class the task is written as (None if unknown): its file's frames
    # are the task's own in a stored traceback.
    written_as: Any = None

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
        timeout: timedelta | None,
        max_in_flight: int | None = None,
        rate_limit: Rate | str | None = None,
        atomic: bool = False,
        asynchronous: bool = False,
        **keyed: Any,
    ) -> None:
        """Check every option (InvalidOption naming it, before anything is registered),
        then keep them."""
        self._set_keyed(kind, keyed)
        error = _option_error(kind)
        validation.bounded_text(kind, name="kind", error=error("kind"), max_length=200)
        validate_priority(priority, kind=kind)
        validate_queue(queue, kind=kind)
        if max_failures is not UNSET:
            validation.positive_int(
                max_failures,
                name=f"{kind}: max_failures",
                error=error("max_failures"),
                allow_none=True,
            )
        lease = _duration(lease, kind=kind, option="lease")
        timeout = _duration(timeout, kind=kind, option="timeout")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise error("backoff")(f"{kind}: backoff must be a Backoff(...)")
        validation.positive_int(
            max_in_flight,
            name=f"{kind}: max_in_flight",
            error=error("max_in_flight"),
            allow_none=True,
        )
        if rate_limit is not None:
            rate_limit = validation.rate(
                rate_limit, name=f"{kind}: rate_limit", error=error("rate_limit")
            )
        _check_atomic(atomic, kind=kind, asynchronous=asynchronous)
        self.kind = kind
        self.origin = origin
        self.queue = queue
        self.priority = int(priority)
        self.max_failures = max_failures
        self.lease = lease
        self.timeout = timeout
        self.backoff = backoff
        self.max_in_flight = max_in_flight
        self.rate_limit = rate_limit
        self.atomic = atomic
        # An ``async def`` task: the worker awaits ``call`` on its event loop.
        self.asynchronous = asynchronous

    def _set_time_limits(
        self, hard: timedelta | float | None, soft: timedelta | float | None
    ) -> None:
        """``time_limit`` and ``soft_time_limit`` (after ``_set_options``): each None or a
        positive duration (seconds or a timedelta), the soft one below the hard one (at
        or past it, it would never be raised)."""
        kind = self.kind
        hard_limit = _duration(hard, kind=kind, option="time_limit")
        soft_limit = _duration(soft, kind=kind, option="soft_time_limit")
        if hard_limit is not None and soft_limit is not None and soft_limit >= hard_limit:
            raise _option_error(kind)("soft_time_limit")(
                f"{kind}: soft_time_limit ({soft_limit}) must be below time_limit "
                f"({hard_limit}): the run's child is killed at the hard limit"
            )
        self.time_limit, self.soft_time_limit = hard_limit, soft_limit

    def _set_keyed(self, kind: str, keyed: dict[str, Any]) -> None:
        """The per-key options: ``key`` a callable of the task's arguments (or None), the
        limits per key checked as their ``JOBQUEUE["LIMITS"]`` entries are."""
        error = _option_error(kind)
        unknown = sorted(set(keyed) - {"key", *KEY_LIMITS})
        if unknown:
            raise error(unknown[0])(
                f"{kind}: unknown task option(s) {', '.join(unknown)}; per-key ones: key, "
                + ", ".join(KEY_LIMITS)
            )
        key = keyed.get("key")
        if key is not None and not callable(key):
            raise error("key")(
                f"{kind}: key must be a callable of the task's arguments returning the job's"
                f" key (a string or None), got {key!r}; a fixed key is .using(key=...)"
            )
        self.key = key
        for name in KEY_LIMITS:
            value = keyed.get(name)
            checked = validation.limit(name, value, name=f"{kind}: {name}", error=error(name))
            setattr(self, name, bool(checked) if name in ("ordered", "fair") else checked)

    def execute(self, payload: dict[str, Any], ctx: Context) -> Any:
        """Run the task here and now (an async one awaited to its end: ``run_maybe_async``)."""
        return run_maybe_async(self.call(payload, ctx))

    def call(self, payload: dict[str, Any], ctx: Context) -> Any:
        """Call the task: its value, or for an async task the coroutine to await."""
        raise NotImplementedError

    def source_file(self) -> str | None:
        """The file the task is written in: its frames are the task's own in a stored
        traceback, even when the project is installed as a package. None if unknown."""
        try:
            return inspect.getsourcefile(self.written_as)
        except TypeError:  # None, a builtin, a callable object: no file to name
            return None

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The payload of a call with these arguments (not yet checked as JSON); raises
        InvalidArguments when they do not fit the task."""
        raise NotImplementedError

    def instance(self, payload: dict[str, Any]) -> Mergeable | None:
        """The typed task for a payload (class-based tasks only)."""
        return None

    def policy(self) -> Policy:
        default = conf.get().policy()
        backoff = self.backoff or Backoff()
        return dataclasses.replace(
            default,
            max_failures=default.max_failures if self.max_failures is UNSET else self.max_failures,
            lease=self.lease or default.lease,
            timeout=self.timeout,
            time_limit=self.time_limit,
            soft_time_limit=self.soft_time_limit,
            backoff_base=default.backoff_base if backoff.base is None else backoff.base,
            backoff_cap=default.backoff_cap if backoff.cap is None else backoff.cap,
        )


def _option_error(kind: str) -> Callable[[str], Callable[[str], InvalidOption]]:
    """The error for a bad task option of ``kind``: ``error("lease")("message")``."""

    def error(option: str) -> Callable[[str], InvalidOption]:
        return partial(InvalidOption, kind=kind, option=option)

    return error


def _duration(value: timedelta | float | None, *, kind: str, option: str) -> timedelta | None:
    """A lease, timeout or time limit: None (the default) or a positive duration."""
    if value is None:
        return None
    return validation.duration(
        value, name=f"{kind}: {option}", error=_option_error(kind)(option), allow_zero=False
    )


def _check_atomic(atomic: object, *, kind: str, asynchronous: bool) -> None:
    error = _option_error(kind)("atomic")
    if not isinstance(atomic, bool):
        raise error(f"{kind}: atomic must be True or False, got {atomic!r}")
    if atomic and asynchronous:
        # An async task's ORM calls run on other threads (sync_to_async), on other
        # connections: outside the transaction the run's settlement is written in.
        raise error(
            f"{kind}: atomic=True needs a plain (not async) function or run(): an async "
            "task's database calls run outside the run's transaction"
        )


def run_maybe_async(value: Any) -> Any:
    """A task's value, an awaitable awaited to its end here. Through ``async_to_sync``,
    not ``asyncio.run``: the task's thread-sensitive ORM calls (``sync_to_async``, and
    the durable steps' ``ctx.astep`` and its twins) come back to this thread and its
    connection, as in ``run_jobs`` inside a test's transaction."""
    if inspect.isawaitable(value):

        async def _await() -> Any:
            return await value

        return async_to_sync(_await)()
    return value


class Registry:
    """Kinds to task definitions; a kind claimed by two different tasks is an error.

    It also keeps the periodic schedules registered in code, by name (``periodic.py``
    checks them and adds those of the PERIODIC setting).
    """

    def __init__(self) -> None:
        self._by_kind: dict[str, TaskDef] = {}
        self._schedules: dict[str, Schedule] = {}
        # The kinds registered by the time the app registry was ready (every installed
        # app's tasks module, and what those import): what every worker process sees.
        # None until then.
        self.discovered: frozenset[str] | None = None
        self._warned: set[str] = set()  # kinds warn_if_unseen has warned of
        # Called once the installed apps' tasks modules are imported (contrib.celery's
        # apps import their autodiscovered modules and register their beat schedules).
        self._when_ready: list[Callable[[], None]] = []

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
                f"No task is registered under kind {kind!r}"
                f"{validation.did_you_mean(kind, self._by_kind)}; is its tasks.py in an "
                "installed app?",
                kind=kind,
            ) from None

    def mark_discovered(self) -> None:
        """Note the kinds registered so far as those any process sees once Django is set
        up (called when the app is ready, after the tasks modules were imported), after
        running the ``when_ready`` callbacks."""
        for hook in self._when_ready:
            hook()
        self._when_ready.clear()
        self.discovered = frozenset(self._by_kind)

    def when_ready(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` when the tasks modules are imported (now, if they are)."""
        if self.discovered is None:
            self._when_ready.append(hook)
        else:
            hook()

    def warn_if_unseen(self, defn: TaskDef) -> None:
        """With ``DEBUG`` on, say once per kind that a job is being enqueued for a task
        no worker will have: registered after Django was set up (defined in a view, a
        shell, a module no ``tasks.py`` imports), its jobs would wait forever, silently.
        A log warning, not ``warnings.warn``: it is about the project, not a deprecation,
        and shows in the shell and the runserver console as it is."""
        if (
            self.discovered is None
            or defn.kind in self.discovered
            or defn.kind in self._warned
            or not settings.DEBUG
        ):
            return
        self._warned.add(defn.kind)
        logger.warning(
            "Task kind %r (%s) was registered after Django was set up: it is in no "
            "installed app's tasks.py, nor imported by one, so workers will not have it "
            "and its jobs will wait forever. Move it to your app's tasks.py.",
            defn.kind,
            defn.origin,
        )

    def find(self, kind: str) -> TaskDef | None:
        return self._by_kind.get(kind)

    def kinds(self) -> list[str]:
        return sorted(self._by_kind)

    def add_schedule(self, schedule: S) -> S:
        """Keep ``schedule``; one of the same name must be the same schedule (a module
        imported twice), else InvalidOption."""
        existing = self._schedules.get(schedule.name)
        if existing is not None and not existing.same_as(schedule):
            raise InvalidOption(
                f"A schedule named {schedule.name!r} is already registered "
                f"({existing.describe()}); give this one ({schedule.describe()}) another "
                "name=...",
                kind=schedule.kind,
                option="name",
            )
        self._schedules[schedule.name] = schedule
        return schedule

    def schedules(self) -> list[Schedule]:
        """The schedules registered in code, in registration order."""
        return list(self._schedules.values())

    def leases(self) -> dict[str, timedelta]:
        """The kinds whose task sets its own lease (the rest take the setting)."""
        return {d.kind: d.lease for d in self._by_kind.values() if d.lease is not None}

    @contextlib.contextmanager
    def isolated(self) -> Iterator[Registry]:
        """Tasks and schedules defined (or replaced) inside the block are forgotten when
        it ends; for tests that define tasks of their own."""
        saved = dict(self._by_kind), dict(self._schedules)
        try:
            yield self
        finally:
            self._by_kind, self._schedules = saved

    def __contains__(self, kind: object) -> bool:
        return kind in self._by_kind

    def __iter__(self) -> Iterator[TaskDef]:
        return iter(list(self._by_kind.values()))


registry = Registry()


def policy_for(kind: str) -> Policy:
    """The failure/lease policy for ``kind``; settings defaults for kinds this process lacks."""
    defn = registry.find(kind)
    return defn.policy() if defn is not None else conf.get().policy()


def validate_priority(priority: Any, *, kind: str | None = None) -> int:
    """One of the three tiers (0 high, 1 normal, 2 low)."""
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or priority not in Priority.values
    ):
        raise InvalidOption(
            f"priority must be one of {sorted(Priority.values)} (Priority.HIGH/NORMAL/LOW), "
            f"got {priority!r}",
            option="priority",
            kind=kind,
        )
    return int(priority)


def validate_queue(queue: Any, *, kind: str | None = None) -> str:
    """A queue name that fits its column."""
    return validation.bounded_text(
        queue, name="queue", error=partial(InvalidOption, option="queue", kind=kind), max_length=100
    )
