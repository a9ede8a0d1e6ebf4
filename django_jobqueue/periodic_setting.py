"""The PERIODIC setting's entries: each a task kind, a cron expression and what to call
it with, checked as far as settings can check them (the kind is looked up in the task
registry when the schedules are read, ``task/periodic.py``). Apart from ``conf`` because
it is a small language of its own: a list of dicts, each with its keys and limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django_jobqueue import validation
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.rules.cron import Cron, zone

# The keys of one PERIODIC entry; kind and cron are required.
PERIODIC_KEYS = ("kind", "cron", "args", "kwargs", "timezone", "catch_up", "name")
SCHEDULE_NAME_MAX = 200


@dataclass(frozen=True)
class PeriodicEntry:
    """One schedule of the PERIODIC setting, checked as far as settings can be: its kind
    is looked up in the task registry when the schedules are read (``periodic.py``)."""

    index: int
    name: str
    kind: str
    cron: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    timezone: str | None = None
    catch_up: bool = False

    @property
    def where(self) -> str:
        return f"PERIODIC[{self.index}] ({self.name!r})"


def entries(raw: Any, *, max_depth: int) -> tuple[PeriodicEntry, ...]:
    """The PERIODIC list: each entry a dict naming a task kind and a cron expression."""
    key = "PERIODIC"
    if isinstance(raw, str | bytes | dict) or not isinstance(raw, list | tuple):
        raise ConfigurationError(
            f"PERIODIC must be a list of dicts such as "
            f'{{"kind": "shop.tasks.report", "cron": "0 3 * * *"}}, got {raw!r}',
            key=key,
        )
    entries: list[PeriodicEntry] = []
    names: dict[str, int] = {}
    for index, item in enumerate(raw):
        entry = _entry(index, item, max_depth=max_depth)
        if entry.name in names:
            raise ConfigurationError(
                f"PERIODIC[{index}]: the schedule name {entry.name!r} is already used by "
                f'PERIODIC[{names[entry.name]}]; give one of them another "name"',
                key=key,
            )
        names[entry.name] = index
        entries.append(entry)
    return tuple(entries)


def _entry(index: int, item: Any, *, max_depth: int) -> PeriodicEntry:
    where = f"PERIODIC[{index}]"
    error = partial(ConfigurationError, key="PERIODIC")
    if not isinstance(item, dict):
        raise error(f"{where} must be a dict with a kind and a cron, got {item!r}")
    unknown = sorted(set(item) - set(PERIODIC_KEYS), key=str)
    if unknown:
        raise error(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}. "
            f"Known keys: {', '.join(PERIODIC_KEYS)}"
        )
    for required in ("kind", "cron"):
        if required not in item:
            raise error(f"{where} needs a {required!r}")
    kind = validation.bounded_text(item["kind"], name=f"{where} kind", error=error, max_length=200)
    name = validation.bounded_text(
        item.get("name", kind), name=f"{where} name", error=error, max_length=SCHEDULE_NAME_MAX
    )
    where = f"{where} ({name!r})"
    timezone = item.get("timezone")
    if timezone is not None:
        if not isinstance(timezone, str):
            raise error(f"{where} timezone must be a time zone name, got {timezone!r}")
        zone(timezone, name=f"{where} timezone", error=error)
    cron = Cron.parse(item["cron"], name=f"{where} cron", error=error)
    args = item.get("args", ())
    if isinstance(args, str | bytes) or not isinstance(args, list | tuple):
        raise error(f"{where} args must be a list, got {args!r}")
    kwargs = item.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise error(f"{where} kwargs must be a dict of argument names to values, got {kwargs!r}")
    for label, value in [
        *((f"args[{i}]", v) for i, v in enumerate(args)),
        *((f"kwargs[{k!r}]", v) for k, v in kwargs.items()),
    ]:
        problem = validation.json_problem(value, max_depth=max_depth)
        if problem is not None:
            raise error(f"{where} {label} cannot be stored as JSON ({problem})")
    catch_up = item.get("catch_up", False)
    if not isinstance(catch_up, bool):
        raise error(f"{where} catch_up must be True or False, got {catch_up!r}")
    return PeriodicEntry(
        index=index,
        name=name,
        kind=kind,
        cron=cron.expression,
        args=tuple(args),
        kwargs=dict(kwargs),
        timezone=timezone,
        catch_up=catch_up,
    )
