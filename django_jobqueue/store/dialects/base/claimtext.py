"""A claim's statement made once per shape, its clock's values filled in on each claim.

A worker asks for the same claim turn after turn (the same kinds, queues, tiers, caps
and leases); only the clock it reads changes: ``now``, and the lease expiries made from
it. Building the statement's fragments anew each time (three tiers' CTEs for a
worker's default claim, more with caps and keyed kinds) cost an idle worker's pickup
80-90 us on the shared two-core machine, 34 us in a hot loop. Here a claim's statement
is built once for its ``shape`` (every field of the spec but the clock's), with marker
times in the clock's places, and each later claim of that shape copies its parameters
and puts its own times where the markers were: the text and every other value are
exactly what building it again would give.

Only where the dialect binds a time as the value itself (PostgreSQL's ``dt``): where it
converts it (to text, for SQLite and MySQL), a marker cannot be found again among the
parameters, and those dialects build every claim's statement as before.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from django_jobqueue.store.dialects.base.fragment import Fragment
from django_jobqueue.store.dialects.base.spec import ClaimSpec

#: The spec's fields that hold the clock's values (filled in on each claim).
CLOCK = ("now", "default_expiry", "expiries")
#: Shapes kept per dialect: a worker has one or two; a bound for a process whose claims
#: keep changing (keyed kinds' cursors), past which the oldest is dropped.
KEPT = 16
# Markers: times no claim reads (distinct values as well as distinct objects).
_MARK = datetime(1, 1, 1, tzinfo=UTC)


def shape(spec: ClaimSpec) -> tuple[Any, ...]:
    """What a claim's statement depends on besides its clock: every field of the spec
    but ``CLOCK`` (a unit test holds this list to the dataclass's fields), and which
    kinds have leases of their own, in their order. Written out: a generic walk of the
    fields cost as much as the building it saves."""
    return (
        spec.worker_id,
        tuple(spec.kinds),
        tuple(spec.queues),
        tuple(spec.tiers),
        tuple(spec.expiries),
        tuple(spec.caps.items()),
        tuple(spec.limited.items()),
        spec.lock_keys,
        spec.lock_space,
        tuple(spec.keyed.items()),
        tuple(spec.key_after.items()),
        tuple(spec.kind_locks.items()),
        spec.key_space,
        spec.settling,
        spec.caught_up,
    )


#: The fields ``shape`` reads, in its order (``tests/unit``: all but ``CLOCK``).
SHAPE = (
    "worker_id",
    "kinds",
    "queues",
    "tiers",
    "caps",
    "limited",
    "lock_keys",
    "lock_space",
    "keyed",
    "key_after",
    "kind_locks",
    "key_space",
    "settling",
    "caught_up",
)


class Template(NamedTuple):
    statement: str
    params: tuple[Any, ...]
    # (parameter position, which clock value: 0 now, 1 the default expiry, 2... the
    # expiries in the spec's order)
    clock: tuple[tuple[int, int], ...]


def _times(spec: ClaimSpec) -> list[datetime]:
    return [spec.now, spec.default_expiry, *spec.expiries.values()]


def template(spec: ClaimSpec, build: Callable[[ClaimSpec], Fragment]) -> Template | None:
    """``build``'s statement for ``spec``'s shape with the clock's places found, or None
    when they cannot be (a time bound as something else than itself)."""
    marks = [_MARK + timedelta(microseconds=i) for i in range(2 + len(spec.expiries))]
    marked = dataclasses.replace(
        spec,
        now=marks[0],
        default_expiry=marks[1],
        expiries=dict(zip(spec.expiries, marks[2:], strict=True)),
    )
    statement, params = build(marked).statement()
    which = {id(m): i for i, m in enumerate(marks)}
    clock = tuple((pos, which[id(p)]) for pos, p in enumerate(params) if id(p) in which)
    found = {i for _, i in clock}
    others = any(isinstance(p, datetime) and id(p) not in which for p in params)
    if others or not {0, 1} <= found:
        return None
    return Template(statement, tuple(params), clock)


class ClaimTexts:
    """One dialect's claim statements by shape (``template``): ``statement(spec)`` is
    ``build(spec).statement()``, made once per shape where the dialect allows."""

    def __init__(self, build: Callable[[ClaimSpec], Fragment]) -> None:
        self.build = build
        self._made: dict[tuple[Any, ...], Template | None] = {}
        self._lock = threading.Lock()  # a dialect serves every thread of its process

    def statement(self, spec: ClaimSpec) -> tuple[str, list[Any]]:
        try:
            key = shape(spec)
            made = self._made[key]
        except TypeError:  # a value that cannot be a key: built as it is
            return self.build(spec).statement()
        except KeyError:
            made = template(spec, self.build)
            with self._lock:
                if len(self._made) >= KEPT:
                    del self._made[next(iter(self._made))]
                self._made[key] = made
        if made is None:
            return self.build(spec).statement()
        params = list(made.params)
        times = _times(spec)
        for pos, which in made.clock:
            params[pos] = times[which]
        return made.statement, params
