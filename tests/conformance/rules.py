"""The claim rules, one ``Rule`` each: the settings that set it, how the subject is
enqueued, the room of the bound worker's turns, and four steps around the way's
trigger: ``arrange`` (after the way's prepare: what takes the place the rule bounds),
``held`` (checks the trigger's claims: the rule held), ``free`` (frees the place and
returns the bound worker's claims after) and ``freed`` (checks those). A rule with
nothing to free (fairness, a rate) has ``free`` None."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from django_jobqueue import Priority, RateLimited, pause_queue, resume_queue
from django_jobqueue.models import Job
from django_jobqueue.worker.claiming import priority_floor
from tests.conformance.harness import SUBJECT, claimed_by, status
from tests.conformance.ways import Cell

Check = Callable[[Cell, list[uuid.UUID]], None]


@dataclass(frozen=True)
class Rule:
    name: str
    settings: dict[str, Any]
    arrange: Callable[[Cell], None]
    held: Check
    free: Callable[[Cell], list[uuid.UUID]] | None = None
    freed: Check | None = None
    using: dict[str, Any] = field(default_factory=dict)
    room: int = 2


def limits(**rule: Any) -> dict[str, Any]:
    return {"LIMITS": {SUBJECT: rule}}


def _not_taken(cell: Cell, claims: list[uuid.UUID]) -> None:
    assert cell.x is not None
    assert cell.x not in claims, cell.said(claims)
    assert status(cell.x) == "pending"


def _taken(cell: Cell, claims: list[uuid.UUID]) -> None:
    assert cell.x in claims, cell.said(claims)
    assert claimed_by(cell.x) == cell.me.worker_id


def _held_by_other(cell: Cell, **using: Any) -> None:
    """A job of the subject's kind (and key), claimed by another worker."""
    cell.blocker = cell.enqueue(**using)
    assert cell.other.turn(1) == [cell.blocker]


def _other_finishes(cell: Cell) -> list[uuid.UUID]:
    assert cell.blocker is not None
    cell.other.finish(cell.blocker)
    return cell.me.turn(cell.room)


# --- the worker's own cap (KIND_CONCURRENCY) ------------------------------------------------


def _i_hold_one(cell: Cell) -> None:
    cell.blocker = cell.enqueue()
    assert cell.me.turn(1) == [cell.blocker]


def _i_finish(cell: Cell) -> list[uuid.UUID]:
    """The worker settles its run: its turn counts the run until it is settled (as the
    loop's does), its next claims with the cap's place free."""
    assert cell.blocker is not None
    return cell.me.finish(cell.blocker, room=cell.room) + cell.me.turn(cell.room)


# --- a rate of enqueues, of the kind or of a key ------------------------------------------


def _spend_the_bucket(cell: Cell) -> None:
    """A rate of one an hour: the subject took the token when it was enqueued; a way
    that enqueues it at the trigger finds it taken by an earlier job."""
    if cell.x is None:
        cell.blocker = cell.enqueue()


def _rate_held(cell: Cell, claims: list[uuid.UUID]) -> None:
    """The rate holds enqueues, never claims: an enqueue over it is refused and writes
    nothing; a job written is claimed however it became claimable, and that took no
    token (the bucket is still spent)."""
    if cell.refused is not None:
        assert cell.x is None
        assert cell.refused.kind == _refused_as(cell)
        assert claims == [cell.blocker], cell.said(claims)
        assert Job.objects.filter(kind=SUBJECT).count() == 1
        return
    _taken(cell, claims)
    with pytest.raises(RateLimited) as refused:
        cell.enqueue()
    assert refused.value.kind == _refused_as(cell)


def _refused_as(cell: Cell) -> str:
    """What a refusal names: the kind, and the key for a rate per key."""
    key = cell.using.get("key")
    return SUBJECT if key is None else f"{SUBJECT} key {key!r}"


def _other_keys_go_on(cell: Cell, claims: list[uuid.UUID]) -> None:
    """A rate per key: the spent key's bucket refuses it, another key's does not."""
    _rate_held(cell, claims)
    cell.enqueue(key="b")


# --- max_in_flight_per_key ---------------------------------------------------------------


def _key_held(cell: Cell) -> None:
    _held_by_other(cell, key="a")
    cell.later = cell.enqueue(key="b")


def _key_held_only(cell: Cell, claims: list[uuid.UUID]) -> None:
    """Key a's place is taken: its job waits; key b's is claimed."""
    _not_taken(cell, claims)
    assert claimed_by(cell.later) == cell.me.worker_id


# --- ordered (FIFO per key) -----------------------------------------------------------------


def _later_of_the_key(cell: Cell) -> None:
    """A later job of the key, of a higher priority, and another worker's claim: it takes
    the later job when the subject is not pending (a waiting step, or not yet enqueued),
    nothing when the subject is the key's head (waiting for its retry, sleep or event)."""
    cell.later = cell.enqueue(key="a", priority=Priority.HIGH)
    got = cell.other.turn(1)
    assert got in ([], [cell.later])
    cell.blocker = got[0] if got else None


def _one_at_a_time(cell: Cell, claims: list[uuid.UUID]) -> None:
    if cell.blocker is not None:  # the key's job in flight: the subject waits
        _not_taken(cell, claims)
    else:  # the subject is the key's head: taken alone, before the later higher one
        assert claims == [cell.x], cell.said(claims)
        assert status(cell.later) == "pending"


def _the_key_moves_on(cell: Cell) -> list[uuid.UUID]:
    if cell.blocker is not None:
        return _other_finishes(cell)
    assert cell.x is not None
    return cell.me.finish(cell.x, room=cell.room) + cell.me.turn(cell.room)


def _next_in_order(cell: Cell, claims: list[uuid.UUID]) -> None:
    taken = cell.x if cell.blocker is not None else cell.later
    assert taken in claims, cell.said(claims)
    assert claimed_by(taken) == cell.me.worker_id


# --- fair ----------------------------------------------------------------------------------


def _a_busy_key(cell: Cell) -> None:
    """Key a: three jobs enqueued before the subject (key b) is claimable, one of them
    running on another worker."""
    first, *_ = [cell.enqueue(key="a") for _ in range(3)]
    assert cell.other.turn(1) == [first]


def _first_of_its_key(cell: Cell, claims: list[uuid.UUID]) -> None:
    """One slot: key b's first job goes before key a's second (older though it is)."""
    assert claims == [cell.x], cell.said(claims)


# --- a paused queue ----------------------------------------------------------------------------

HELD = "matrix-held"


def _pause(cell: Cell) -> None:
    assert pause_queue(HELD)


def _resume(cell: Cell) -> list[uuid.UUID]:
    assert resume_queue(HELD)
    return cell.me.turn(cell.room)


# --- the priority floor (PRIORITY_RATIO) ---------------------------------------------------

LOW_SLOT = 24  # with a ratio of 4, the slot that prefers LOW jobs


def _a_high_job(cell: Cell) -> None:
    cell.blocker = cell.enqueue(priority=Priority.HIGH)
    assert priority_floor(LOW_SLOT, 4) == Priority.LOW
    cell.me.slot = LOW_SLOT


def _low_first(cell: Cell, claims: list[uuid.UUID]) -> None:
    """The slot that prefers LOW takes the LOW subject before the older HIGH job."""
    assert claims == [cell.x], cell.said(claims)
    assert status(cell.blocker) == "pending"


def _next_slot(cell: Cell) -> list[uuid.UUID]:
    return cell.me.turn(cell.room)


def _high_next(cell: Cell, claims: list[uuid.UUID]) -> None:
    assert claims == [cell.blocker], cell.said(claims)


RULES = [
    Rule(
        "worker_cap",
        {"KIND_CONCURRENCY": {SUBJECT: 1}},
        _i_hold_one,
        _not_taken,
        _i_finish,
        _taken,
    ),
    Rule(
        "max_in_flight",
        limits(max_in_flight=1),
        _held_by_other,
        _not_taken,
        _other_finishes,
        _taken,
    ),
    Rule("rate_limit", limits(rate_limit="1/h"), _spend_the_bucket, _rate_held),
    Rule(
        "rate_limit_per_key",
        limits(rate_limit_per_key="1/h"),
        _spend_the_bucket,
        _other_keys_go_on,
        using={"key": "a"},
    ),
    Rule(
        "max_in_flight_per_key",
        limits(max_in_flight_per_key=1),
        _key_held,
        _key_held_only,
        _other_finishes,
        _taken,
        using={"key": "a"},
    ),
    Rule(
        "ordered",
        limits(ordered=True),
        _later_of_the_key,
        _one_at_a_time,
        _the_key_moves_on,
        _next_in_order,
        using={"key": "a"},
    ),
    Rule("fair", limits(fair=True), _a_busy_key, _first_of_its_key, using={"key": "b"}, room=1),
    Rule("paused_queue", {}, _pause, _not_taken, _resume, _taken, using={"queue": HELD}),
    Rule(
        "priority_floor",
        {"PRIORITY_RATIO": 4},
        _a_high_job,
        _low_first,
        _next_slot,
        _high_next,
        using={"priority": Priority.LOW},
        room=1,
    ),
]
