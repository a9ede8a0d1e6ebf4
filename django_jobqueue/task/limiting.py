"""Global limits per kind, whichever way they are set: ``max_in_flight`` (jobs of the kind
claimed at once, all workers together) and ``rate_limit`` (enqueues a second, minute or
hour, all processes together).

Each limit comes from the first place that sets it:

1. the database: ``set_limit()`` / ``manage.py jobqueue limit`` (changeable at run time);
2. ``JOBQUEUE["LIMITS"][kind]``;
3. the task's option (``@task(max_in_flight=2, rate_limit="10/s")``).

A place sets a limit when it names it; naming it as None lifts it (the places below are
not asked). A process keeps its copy of the run-time limits for ``REFRESH`` seconds;
a worker re-reads them as often while busy, and at once when told (a NOTIFY, on
PostgreSQL). Enforcement is in ``store``: the claim counts, the enqueue takes tokens.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed
from django.db import connections
from django.dispatch import receiver

from django_jobqueue import conf, store, validation
from django_jobqueue.errors import InvalidLimit
from django_jobqueue.loops import on_event_loop
from django_jobqueue.store import KeyRule
from django_jobqueue.task.registry import TaskDef, registry
from django_jobqueue.validation import Rate

if TYPE_CHECKING:
    from django_jobqueue.store import KeyRule, Override

REFRESH = 2.0  # seconds a process trusts its copy of the run-time limits

UNCHANGED: Any = type("Unchanged", (), {"__repr__": lambda self: "UNCHANGED"})()

DATABASE, SETTINGS, TASK = "database", "settings", "task"

# The per-key limits (issue 23), set in the same three places as the kind's own.
PER_KEY = ("max_in_flight_per_key", "rate_limit_per_key", "ordered", "fair")


@dataclass(frozen=True)
class KindLimits:
    """A kind's limits in force, and where each comes from (``"database"``,
    ``"settings"``, ``"task"``; ``""`` when nothing sets it)."""

    kind: str
    max_in_flight: int | None
    rate_limit: Rate | None
    max_in_flight_from: str
    rate_limit_from: str
    # The per-key limits in force (``PER_KEY`` names; None or False: not limited) and
    # where each comes from.
    per_key: dict[str, Any] = field(default_factory=dict)
    per_key_from: dict[str, str] = field(default_factory=dict)

    @property
    def limited(self) -> bool:
        keyed = any(v not in (None, False) for v in self.per_key.values())
        return self.max_in_flight is not None or self.rate_limit is not None or keyed

    def per_key_summary(self) -> str:
        """The per-key limits in force, in words, each with where it is set."""
        words = {"max_in_flight_per_key": "most {} a key", "rate_limit_per_key": "{} a key"}
        said = []
        for name, value in self.per_key.items():
            if value not in (None, False):
                what = words[name].format(value) if name in words else name
                said.append(f"{what} ({self.per_key_from[name]})")
        return ", ".join(said)

    def rule(self) -> KeyRule | None:
        """The claim's per-key rule for the kind (None: it has none)."""
        most = self.per_key.get("max_in_flight_per_key")
        ordered = bool(self.per_key.get("ordered"))
        fair = bool(self.per_key.get("fair"))
        if most is None and not ordered and not fair:
            return None
        return KeyRule(most=most, ordered=ordered, fair=fair)


# (overrides, monotonic time they were read); None until the first read.
_cache: tuple[dict[str, Override], float] | None = None


def overrides(*, max_age: float | None = REFRESH) -> dict[str, Override]:
    """The run-time limits, as this process last read them; read again when older than
    ``max_age`` seconds (0: now; None: only if never read)."""
    global _cache
    cached = _cache
    now = time.monotonic()
    if cached is not None and (max_age is None or now - cached[1] < max_age):
        return cached[0]

    found = store.limit_overrides() if not on_event_loop() else _read_off_loop()
    _cache = (found, now)
    return found


def _read_off_loop() -> dict[str, Override]:
    """The limits read on a thread of its own, for a caller on an event loop (an async
    view's or an async task's code building a signature or a workflow): Django refuses a
    query on the loop's thread. The thread's connection is closed when it is done; the
    caller's context (the queue database it routes to) goes with it."""

    def read() -> dict[str, Override]:
        try:
            return store.limit_overrides()
        finally:
            connections.close_all()  # this thread's own

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobqueue-limits") as pool:
        return pool.submit(contextvars.copy_context().run, read).result()


def forget() -> None:
    """Drop this process's copy of the run-time limits: the next use reads them."""
    global _cache
    _cache = None


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("JOBQUEUE", "DATABASES"):
        forget()


def resolve(kind: str, *, max_age: float | None = REFRESH) -> KindLimits:
    """The limits in force for ``kind``."""
    return _resolve(kind, overrides(max_age=max_age), conf.get().limits)


def _resolve(
    kind: str, found: dict[str, Override], configured: dict[str, dict[str, Any]]
) -> KindLimits:
    override = found.get(kind)
    setting = configured.get(kind, {})
    defn = registry.find(kind)
    most, most_from = _pick("max_in_flight", override, setting, defn)
    rate, rate_from = _pick("rate_limit", override, setting, defn)
    per_key, per_key_from = {}, {}
    for name in PER_KEY:
        per_key[name], per_key_from[name] = _pick(name, override, setting, defn)
    if isinstance(per_key["rate_limit_per_key"], str):  # as the database stores it
        per_key["rate_limit_per_key"] = validation.rate(
            per_key["rate_limit_per_key"], name="rate_limit_per_key", error=ValueError
        )
    return KindLimits(kind, most, rate, most_from, rate_from, per_key, per_key_from)


def _pick(
    name: str, override: Override | None, setting: dict[str, Any], defn: TaskDef | None
) -> tuple[Any, str]:
    """One limit and where it is set: the database, then the setting, then the task's
    option (no source when none sets it)."""
    if override is not None and name in PER_KEY and name in override.per_key:
        return override.per_key[name], DATABASE
    if override is not None and name not in PER_KEY and getattr(override, f"sets_{name}"):
        return getattr(override, name), DATABASE
    if name in setting:
        return setting[name], SETTINGS
    value = getattr(defn, name, None) if defn is not None else None
    return value, TASK if value not in (None, False) else ""


def rate_for(kind: str, task_rate: Rate | None) -> Rate | None:
    """The enqueue rate limit in force for ``kind`` (the task's own is ``task_rate``):
    the hot path of every enqueue, so dictionary lookups and no query but a refresh."""
    override = overrides().get(kind)
    if override is not None and override.sets_rate_limit:
        return override.rate_limit
    setting = conf.get().limits.get(kind)
    if setting is not None and "rate_limit" in setting:
        rate: Rate | None = setting["rate_limit"]
        return rate
    return task_rate


def rate_per_key_for(kind: str, task_rate: Rate | None) -> Rate | None:
    """The per-key enqueue rate limit in force for ``kind`` (the task's own is
    ``task_rate``), as ``rate_for``."""
    override = overrides().get(kind)
    if override is not None and "rate_limit_per_key" in override.per_key:
        text = override.per_key["rate_limit_per_key"]
        return None if text is None else validation.rate(text, name="rate", error=ValueError)
    setting = conf.get().limits.get(kind)
    if setting is not None and "rate_limit_per_key" in setting:
        rate: Rate | None = setting["rate_limit_per_key"]
        return rate
    return task_rate


def claim_limits(
    kinds: Iterable[str], *, max_age: float | None = REFRESH
) -> tuple[dict[str, int], dict[str, KeyRule]]:
    """What a worker's claims enforce: the kinds among ``kinds`` with a
    ``max_in_flight`` in force and its value, and those with per-key rules."""
    found = overrides(max_age=max_age)
    configured = conf.get().limits
    most: dict[str, int] = {}
    rules: dict[str, KeyRule] = {}
    for kind in kinds:
        resolved = _resolve(kind, found, configured)
        if resolved.max_in_flight is not None:
            most[kind] = resolved.max_in_flight
        rule = resolved.rule()
        if rule is not None:
            rules[kind] = rule
    return most, rules


def max_in_flight(kinds: Iterable[str], *, max_age: float | None = REFRESH) -> dict[str, int]:
    """The kinds among ``kinds`` with a ``max_in_flight`` in force, and its value."""
    found = overrides(max_age=max_age)
    configured = conf.get().limits
    limits = {}
    for kind in kinds:
        most = _resolve(kind, found, configured).max_in_flight
        if most is not None:
            limits[kind] = most
    return limits


def limits(*, max_age: float | None = REFRESH) -> list[KindLimits]:
    """Every kind that has a limit in force, or a run-time limit set, by kind."""
    found = overrides(max_age=max_age)
    configured = conf.get().limits
    kinds = sorted({*registry.kinds(), *configured, *found})
    resolved = [_resolve(kind, found, configured) for kind in kinds]
    return [k for k in resolved if k.limited or k.kind in found]


def set_limit(
    kind: str,
    *,
    max_in_flight: Any = UNCHANGED,
    rate_limit: Any = UNCHANGED,
    actor: str = "",
    **per_key: Any,
) -> KindLimits:
    """Set ``kind``'s limits at run time (see ``django_jobqueue.set_limit``)."""
    if not isinstance(kind, str) or kind not in registry:
        known = ", ".join(registry.kinds()) or "none"
        raise InvalidLimit(
            f"No task is registered under kind {kind!r}, so it cannot be limited; known: {known}",
            kind=kind,
        )
    changes: dict[str, Any] = {}
    given = {"max_in_flight": max_in_flight, "rate_limit": rate_limit, **per_key}
    unknown = sorted(set(given) - set(validation.LIMIT_NAMES))
    if unknown:
        raise InvalidLimit(
            f"{kind}: unknown limit(s) {', '.join(unknown)}; known: "
            f"{', '.join(validation.LIMIT_NAMES)}",
            kind=kind,
        )
    for name, value in given.items():
        if value is not UNCHANGED:
            error = partial(InvalidLimit, kind=kind, option=name)
            changes[name] = validation.limit(name, value, name=f"{kind}: {name}", error=error)
    if not changes:
        raise InvalidLimit(
            f"{kind}: give max_in_flight or rate_limit, or a per-key limit "
            f"({', '.join(PER_KEY)}; None lifts one), or use clear_limit()",
            kind=kind,
        )

    store.set_limit(kind=kind, changes=changes, actor=actor)
    forget()
    return resolve(kind)


def clear_limit(kind: str) -> bool:
    """Remove ``kind``'s run-time limits (see ``django_jobqueue.clear_limit``)."""
    if not isinstance(kind, str) or not kind:
        raise InvalidLimit(f"clear_limit() takes a kind name, got {kind!r}", kind=str(kind))

    cleared = store.clear_limit(kind=kind)
    forget()
    return cleared
