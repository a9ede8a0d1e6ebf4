"""Periodic jobs: schedules that enqueue a task on a cron expression.

A schedule is registered in code (``@task(cron=...)``, ``cron = ...`` on a ``Task``
class, or :func:`periodic` for a task defined elsewhere) or in the ``PERIODIC``
setting. Every worker runs the schedules (``scheduler.py``); the database makes sure
each tick is enqueued once (``store/schedules.py``). This module checks the
definitions and builds each tick's enqueue request; it knows nothing of threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from functools import partial
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings

from django_jobqueue import conf, routing, store, validation
from django_jobqueue.errors import (
    ConfigurationError,
    InvalidArguments,
    InvalidOption,
    JobQueueError,
    UnknownKind,
)
from django_jobqueue.periodic_setting import SCHEDULE_NAME_MAX, PeriodicEntry
from django_jobqueue.rules.cron import Cron, zone, zone_name
from django_jobqueue.task.options import Options, build_request, check_json, encode_payload
from django_jobqueue.task.registry import TaskDef, registry

if TYPE_CHECKING:
    import uuid

    from django_jobqueue.store import EnqueueRequest


@dataclass(frozen=True, eq=False)
class ScheduleDef:
    """One schedule: which task, when, with which arguments."""

    name: str
    kind: str
    expression: str
    tz: tzinfo | None  # None: the project's TIME_ZONE, read when the schedule is used
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    catch_up: bool = False
    source: str = "code"  # or "settings"

    @property
    def timezone(self) -> tzinfo:
        if self.tz is not None:
            return self.tz
        return ZoneInfo(django_settings.TIME_ZONE) if django_settings.TIME_ZONE else UTC

    @property
    def timezone_name(self) -> str:
        return zone_name(self.timezone)

    @property
    def cron(self) -> Cron:
        return Cron(self.expression, self.timezone)

    def task(self) -> TaskDef:
        return registry.get(self.kind)

    def payload(self) -> dict[str, Any]:
        """The task's payload for these arguments; raises InvalidArguments or
        InvalidPayload (naming the argument) when they do not fit."""
        defn = self.task()
        payload = defn.bind(self.args, self.kwargs)
        for name, value in payload.items():
            check_json(name, value, kind=self.kind)
        return payload

    def request(self, tick: datetime) -> EnqueueRequest:
        """The enqueue request of this schedule's job for ``tick``."""
        defn = self.task()
        payload = self.payload()
        text = encode_payload(payload, kind=self.kind)
        return build_request(
            defn,
            payload,
            Options(idempotency_key=store.tick_key(self.name, tick)),
            task=defn.instance(payload),
            payload_json=text,
        )

    def same_as(self, other: object) -> bool:
        if not isinstance(other, ScheduleDef):
            return False
        return (
            self.name,
            self.kind,
            self.expression,
            self.tz,
            self.args,
            self.kwargs,
            self.catch_up,
        ) == (
            other.name,
            other.kind,
            other.expression,
            other.tz,
            other.args,
            other.kwargs,
            other.catch_up,
        )

    def describe(self) -> str:
        return f"{self.kind} on {self.expression!r}"


def periodic(
    task: Any,
    cron: str,
    *,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
    timezone: str | tzinfo | None = None,
    catch_up: bool = False,
    name: str | None = None,
) -> ScheduleDef:
    """Run ``task`` on the cron expression ``cron``: every worker runs the schedule and
    each tick is enqueued once. ``task`` is a ``@task`` function, a ``Task`` subclass or
    a registered kind name; the arguments are checked against it now."""
    return register_schedule(
        _definition(task),
        cron,
        args=args,
        kwargs=kwargs,
        timezone=timezone,
        catch_up=catch_up,
        name=name,
    )


def register_schedule(
    defn: TaskDef,
    cron: Any,
    *,
    args: Any = (),
    kwargs: Any = None,
    timezone: Any = None,
    catch_up: Any = False,
    name: Any = None,
    lazy: bool = False,
) -> ScheduleDef:
    """Check and register a schedule of ``defn``. ``lazy`` leaves the arguments to be
    checked when the schedules are read (a ``Task`` class is not a dataclass yet when
    its ``cron`` is seen)."""
    return registry.add_schedule(
        _build(
            defn,
            cron,
            args=args,
            kwargs=kwargs,
            timezone=timezone,
            catch_up=catch_up,
            name=name,
            lazy=lazy,
        )
    )


def _definition(task: Any) -> TaskDef:
    """The registered task ``task`` names: a task object, a Task subclass or a kind."""
    if isinstance(task, TaskDef):
        if registry.find(task.kind) is not task:
            raise UnknownKind(f"{task!r} is not a registered task", kind=task.kind)
        return task
    if isinstance(task, type):
        kind = getattr(task, "kind", None)
        defn = registry.find(kind) if isinstance(kind, str) else None
        if defn is None or getattr(defn, "cls", None) is not task:
            raise UnknownKind(
                f"{task.__qualname__} is not a registered task (does it define run(self, ctx)?)",
                kind=str(kind or task.__qualname__),
            )
        return defn
    if isinstance(task, str):
        return registry.get(task)
    raise InvalidArguments(
        "periodic() takes a @task function, a Task subclass or a kind name, not "
        f"{type(task).__name__}"
    )


def _build(
    defn: TaskDef,
    cron: Any,
    *,
    args: Any,
    kwargs: Any,
    timezone: Any,
    catch_up: Any,
    name: Any,
    lazy: bool = False,
) -> ScheduleDef:
    """A schedule registered in code, every option checked (those of the PERIODIC
    setting are checked by ``conf`` and built by ``from_settings``)."""
    kind = defn.kind

    def error(option: str) -> Any:
        return partial(InvalidOption, kind=kind, option=option)

    name = validation.bounded_text(
        kind if name is None else name,
        name=f"{kind}: schedule name",
        error=error("name"),
        max_length=SCHEDULE_NAME_MAX,
    )
    tz = (
        None
        if timezone is None
        else zone(timezone, name=f"{name}: timezone", error=error("timezone"))
    )
    expression = Cron.parse(
        cron, tz=tz or UTC, name=f"{name}: cron", error=error("cron")
    ).expression
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise InvalidArguments(f"{name}: args must be a list or tuple, got {args!r}", kind=kind)
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InvalidArguments(
            f"{name}: kwargs must be a dict of argument names to values, got {kwargs!r}",
            kind=kind,
        )
    if not isinstance(catch_up, bool):
        raise error("catch_up")(f"{name}: catch_up must be True or False, got {catch_up!r}")
    schedule = ScheduleDef(
        name=name,
        kind=kind,
        expression=expression,
        tz=tz,
        args=tuple(args),
        kwargs=dict(kwargs),
        catch_up=catch_up,
    )
    if not lazy:
        schedule.payload()
    return schedule


def from_settings(entry: PeriodicEntry) -> ScheduleDef:
    """A schedule of the PERIODIC setting. ``conf`` checked the entry itself when it read
    the settings (its keys, name, cron, time zone, arguments as JSON, catch_up), so they
    are not checked again here; what is left needs the task registry: that the kind is
    registered and the arguments fit its task. A problem is a ConfigurationError naming
    the entry."""
    try:
        schedule = ScheduleDef(
            name=entry.name,
            kind=registry.get(entry.kind).kind,
            expression=entry.cron,
            tz=None if entry.timezone is None else ZoneInfo(entry.timezone),
            args=entry.args,
            kwargs=dict(entry.kwargs),
            catch_up=entry.catch_up,
            source="settings",
        )
        schedule.payload()
    except JobQueueError as exc:
        raise ConfigurationError(f"{entry.where}: {exc}", key="PERIODIC") from exc
    return schedule


def schedules() -> list[ScheduleDef]:
    """Every schedule, those of code first, then those of the PERIODIC setting; each
    checked (a class task's arguments too). Raises ConfigurationError for a setting
    that does not fit the tasks, InvalidArguments/InvalidPayload for a code schedule."""
    # The registry keeps only ScheduleDefs (periodic() and the Task hook add them), typed
    # loosely so that it need not import this module.
    found = [s for s in registry.schedules() if isinstance(s, ScheduleDef)]
    for schedule in found:
        if schedule.source == "code":
            schedule.payload()
    names: dict[str, ScheduleDef] = {s.name: s for s in found}
    for entry in conf.get().periodic:
        schedule = from_settings(entry)
        clash = names.get(schedule.name)
        if clash is not None:
            raise ConfigurationError(
                f"{entry.where}: the schedule name {schedule.name!r} is also registered in "
                f'code ({clash.describe()}); give the setting another "name"',
                key="PERIODIC",
            )
        names[schedule.name] = schedule
        found.append(schedule)
    return found


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as the command and the admin show it."""

    name: str
    kind: str
    cron: str
    timezone: str
    catch_up: bool
    next_run: datetime
    last_tick: datetime | None
    last_job_id: uuid.UUID | None
    last_job_status: str | None  # None: no job yet; "removed": cleaned up since


def overview(*, now: datetime | None = None) -> list[ScheduleRow]:
    """Each schedule with its next run and its last tick's job (read only)."""
    from django.utils import timezone as dj_timezone

    now = now or dj_timezone.now()
    defined = schedules()
    with routing.using(conf.get().database):  # the schedules' home, with several
        states = store.schedule_states(names=[s.name for s in defined])
        jobs = store.last_jobs(
            job_ids=[st.last_job_id for st in states.values() if st.last_job_id is not None]
        )
    rows = []
    for s in defined:
        state = states.get(s.name)
        job_id = state.last_job_id if state else None
        rows.append(
            ScheduleRow(
                name=s.name,
                kind=s.kind,
                cron=s.expression,
                timezone=s.timezone_name,
                catch_up=s.catch_up,
                next_run=s.cron.next_after(now),
                last_tick=state.last_tick if state else None,
                last_job_id=job_id,
                last_job_status=None if job_id is None else jobs.get(job_id, "removed"),
            )
        )
    return rows
