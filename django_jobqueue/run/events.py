"""Events of durable waits: an event's name and key checked against their columns, a
wait's arguments checked as ``emit`` checks its own, and ``emit`` itself (stored, and
delivered to every job waiting for it, by ``store.durable``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.utils import timezone

from django_jobqueue import conf, routing, validation
from django_jobqueue.errors import InvalidEvent, InvalidStep
from django_jobqueue.models.events import EVENT_KEY_MAX, EVENT_NAME_MAX
from django_jobqueue.run.executor import output_problem
from django_jobqueue.store import durable as stored
from django_jobqueue.store.locating import on_database

# An event no job waits for is kept for a job that waits later; said at INFO, since a
# name or key misspelt at the sender is otherwise silent (emit() returns 0 either way).
logger = logging.getLogger("django_jobqueue")


def wait_args(name: Any, key: Any, timeout: Any) -> tuple[str, str, timedelta | None]:
    """``ctx.wait_for``'s arguments checked as ``emit`` checks its own."""
    name, key = event_address(name, key)
    if timeout is None:
        return name, key, None
    wait = validation.duration(
        timeout,
        name="the wait's timeout",
        error=lambda m: InvalidStep(m, argument="timeout"),
    )
    return name, key, wait


def event_address(name: Any, key: Any) -> tuple[str, str]:
    """An event's name and key, checked against their columns."""
    checked = validation.bounded_text(
        name,
        name="the event name",
        error=lambda m: InvalidEvent(m, argument="name"),
        max_length=EVENT_NAME_MAX,
    )
    if not isinstance(key, str) or len(key) > EVENT_KEY_MAX:
        raise InvalidEvent(
            f"the event key must be a string of at most {EVENT_KEY_MAX} characters, "
            f"got {key!r:.80}",
            argument="key",
        )
    problem = validation.text_problem(key)
    if problem is not None:
        raise InvalidEvent(f"the event key {problem}: {key!r:.80}", argument="key")
    return checked, key


def emit(name: Any, *, key: Any = "", payload: Any = None, database: str | None = None) -> int:
    """Send an event: stored (kept for EVENT_RETENTION, for a job that waits later) and
    delivered to every job waiting for its name and key, in the caller's transaction
    on the jobs database if one is open (like ``enqueue``); returns how many waiting
    jobs it released. A name, key or payload that cannot be stored raises
    ``InvalidEvent`` naming it, before anything is written.

    With several queue databases the event goes where its waiters are: ``database``
    if given, else under ROUTE "key" the database of its key (where the jobs keyed
    with the event's key wait), else every queue database (a waiter may be on any)."""
    name, key = event_address(name, key)
    problem = output_problem(payload, "the event payload", conf.get().max_payload_bytes)
    if problem is not None:
        raise InvalidEvent(problem, argument="payload")
    released = 0
    for alias in _event_databases(key, database):
        with on_database(alias):
            released += stored.emit(name=name, key=key, payload=payload, now=timezone.now())
    if not released:
        logger.info(
            "emit(%r, key=%r): no job waits for this event now; it is kept for "
            "EVENT_RETENTION for a job that waits later",
            name,
            key,
        )
    return released


def _event_databases(key: str, database: str | None) -> tuple[str, ...]:
    if database is not None:
        return (routing.check(database),)
    settings = conf.get().databases
    if settings is None:
        return (routing.current(),)
    if settings.route == "key":
        return (routing.for_key(key),)
    return routing.aliases()
