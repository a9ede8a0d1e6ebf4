"""Durable steps' storage: a job's recorded steps, its parking for a sleep or an event,
and the events ``emit`` sends.

Every write a run makes here is guarded as its settlement is (status claimed,
``claimed_by`` and run number), so a run whose claim was lost records nothing. A wait
and an emit of the same name and key first lock that name's ``EventChannel`` row:
whichever comes second sees what the first committed, so an event emitted while a job
parks is either found by the job or releases it, never missed by both.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, Exists, OuterRef, QuerySet

from django_jobqueue.models import Event, EventChannel, Status, StepRecord
from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.store import sql, streams, wakeups
from django_jobqueue.store.dialects.base.settling import GUARD_PARAMS
from django_jobqueue.store.settling import settle

# The parking columns, read with the records.
RECORDS = StepRecord._meta.db_table
_WAIT_COLUMNS = ("parked", "wake_at", "wait_name", "wait_key", "delivered", "visible_at")


@dataclass(frozen=True, slots=True)
class Book:
    """A job's durable-step columns as stored, and its records (``StepRecord`` rows,
    oldest first, each as decoded: a record that cannot be read is kept as it reads)."""

    steps: list[Any]
    parked: str
    wake_at: datetime | None
    wait_name: str | None
    wait_key: str | None
    delivered: Any
    visible_at: datetime | None = None  # when the job became runnable (a claim keeps it)
    size: int = 0  # the records' JSON in bytes, as written (what MAX_STEPS_BYTES sums)


@dataclass(frozen=True, slots=True)
class Parking:
    """How a run parks its job: the record it appends first (a sleep's; None for a
    wait, recorded when it is passed), why ("sleep" or "event"), until when (None: until
    an event comes), and the event it waits for."""

    record: dict[str, Any] | None
    parked: str
    wake_at: datetime | None
    wait_name: str | None = None
    wait_key: str | None = None


def events() -> QuerySet[Event]:
    return Event.objects.using(sql.alias())


def records(*, job_id: uuid.UUID) -> list[Any]:
    """The job's recorded steps, oldest first (what readers show; empty for none)."""
    return [record for record, _ in _read(job_id)]


def _read(job_id: uuid.UUID) -> list[tuple[Any, int]]:
    """Each record, decoded (one that cannot be, as ``validation.Undecodable``), with its
    size, oldest first. A raw read: a replay reads every record before the step it is
    at, and the ORM's conversion of each row cost more than the database's reading."""
    d = sql.dialect()
    rows = d.run(
        f"SELECT record, size FROM {RECORDS} WHERE job_id = %s ORDER BY id", [d.job_id(job_id)]
    )
    return [(sql.loads(text), size) for text, size in rows]


def load(*, job_id: uuid.UUID) -> Book | None:
    """The job's recorded steps and parking (None: no such job)."""
    row = sql.jobs().filter(id=job_id).values_list(*_WAIT_COLUMNS).first()
    if row is None:
        return None
    pairs = _read(job_id)
    parked, wake_at, wait_name, wait_key, delivered, visible_at = row
    book = Book(
        steps=[r for r, _ in pairs],
        parked=parked,
        wake_at=wake_at,
        wait_name=wait_name,
        wait_key=wait_key,
        delivered=delivered,
        visible_at=visible_at,
        size=sum(n for _, n in pairs),
    )
    delivered = book.delivered
    if isinstance(delivered, dict) and "payload" not in delivered and "event" in delivered:
        # ``emit`` delivers a reference: the payload is stored once, in the event's row
        # (kept by ``prune_events`` while a delivery points at it). No row: no payload key.
        found_payload = events().filter(id=delivered["event"]).values_list("payload", flat=True)
        for payload in found_payload[:1]:
            delivered = {**delivered, "payload": payload}
        return dataclasses.replace(book, delivered=delivered)
    return book


def _guarded(job_id: uuid.UUID, run_no: int, worker_id: str) -> QuerySet[Any]:
    return sql.jobs().filter(
        id=job_id, status=Status.CLAIMED, claimed_by=worker_id, run_count=run_no
    )


def record(
    *,
    job_id: uuid.UUID,
    run_no: int,
    worker_id: str,
    text: str,
    clear_wait: bool = False,
    stream: Sequence[streams.NewItem] = (),
) -> bool:
    """Append one record (its JSON text, ``validation.dumps``) to the job's steps by a
    guarded write (``clear_wait``: the run is past its sleep or wait, so the parking
    columns are cleared by the same write); whether the guard held (if not, nothing is
    written). Its cost does not grow with the steps before it. Hand-written: a step's
    record is on a task's hot path, and the ORM's building of the statements cost a
    third of its time. ``stream``: the items the step wrote to the job's stream, appended
    by the same transaction (``streams.insert_held``), so they are stored exactly when
    the step's record is."""
    d = sql.dialect()
    guard = sql.Fragment(GUARD_PARAMS, [d.job_id(job_id), Status.CLAIMED.value, worker_id, run_no])
    clear = _CLEARED if clear_wait else None
    if not stream:
        return d.append_record(guard=guard, clear=clear, job_id=job_id, record=text)
    with transaction.atomic(using=sql.alias()):
        if not d.append_record(guard=guard, clear=clear, job_id=job_id, record=text):
            return False
        streams.insert_held(job_id=job_id, run_no=run_no, new=stream)
    return True


_CLEARED = "parked = '', wake_at = NULL, wait_name = NULL, wait_key = NULL, delivered = NULL"


def park(*, settlement: Settlement, parking: Parking) -> bool:
    """End the run by parking its job: its steps and parking written, then its paused
    settlement (pending at ``visible_at``), in one transaction (a savepoint in an atomic
    task's), both guarded; whether the guard held (if not, nothing is written)."""
    with transaction.atomic(using=sql.alias()):
        return _park(settlement, parking)


def _park(settlement: Settlement, parking: Parking) -> bool:
    changes = {
        "parked": parking.parked,
        "wake_at": parking.wake_at,
        "wait_name": parking.wait_name,
        "wait_key": parking.wait_key,
        "delivered": None,
    }
    if not _guarded(settlement.job_id, settlement.run_no, settlement.worker).update(**changes):
        return False
    if parking.record is not None:  # the row is held by the update above
        text = sql.dumps(parking.record)
        StepRecord.objects.using(sql.alias()).create(
            job_id=settlement.job_id, record=parking.record, size=len(text)
        )
    [applied] = settle(worker_id=settlement.worker, settlements=[settlement])
    if not applied:  # cannot be, with the row just updated under its guard: roll back
        transaction.set_rollback(True, using=sql.alias())
    return applied


def wait(
    *,
    settlement: Settlement,
    parking: Parking,
    since: datetime,
    taken: Collection[int],
) -> tuple[int, Any] | bool:
    """A run waits for the event ``parking`` names: an event of that name and key
    emitted since ``since`` and not in ``taken`` (the events this job had) is returned
    as (id, payload), nothing written; else the job is parked as ``park`` does (whether
    the guard held). Under the name's channel lock, so an emit cannot slip between."""
    assert parking.wait_name is not None
    assert parking.wait_key is not None
    with transaction.atomic(using=sql.alias()):
        _lock(parking.wait_name, parking.wait_key)
        found = (
            events()
            .filter(name=parking.wait_name, key=parking.wait_key, created_at__gte=since)
            .exclude(id__in=list(taken))
            .order_by("created_at", "id")
            .values_list("id", "payload")
            .first()
        )
        if found is not None:
            return found
        return _park(settlement, parking)


def _lock(name: str, key: str) -> None:
    """Hold the name and key's channel row until the transaction ends."""
    EventChannel.objects.using(sql.alias()).select_for_update().get_or_create(name=name, key=key)


def emit(*, name: str, key: str, payload: Any, now: datetime) -> int:
    """Store an event and release, in the same transaction (the caller's, if one is
    open), every job parked waiting for its name and key, the event delivered to each;
    returns how many were released, and wakes the workers of their queues (on commit).
    Values are checked by the caller."""
    with transaction.atomic(using=sql.alias()):
        _lock(name, key)
        event = events().create(name=name, key=key, payload=payload, created_at=now)
        waiting = sql.jobs().filter(
            status=Status.PENDING, parked="event", wait_name=name, wait_key=key
        )
        # Under the channel's lock no job starts waiting for this name and key meanwhile.
        queues = set(waiting.values_list("queue", flat=True).distinct())
        if not queues:
            return 0
        # The payload stays in the event's row alone: each waiter gets a reference, read
        # when it runs, so one large event is not copied into every waiting job's row.
        delivered = {"event": event.id, "name": name, "key": key}
        released = waiting.update(visible_at=now, parked="", delivered=delivered)
    for queue in sorted(queues):
        wakeups.notify(sql.alias(), queue)
    return released


def prune_events(*, emitted_before: datetime, batch_size: int = 1000) -> int:
    """Delete events emitted before ``emitted_before`` in batches, then the channels that
    no event and no waiting job use; returns how many events were deleted. An event of a
    name and key that a job was delivered and has not yet read (``delivered`` set) is
    kept: that job's delivery points at the event's row for its payload."""
    total = 0
    pointed_at = Exists(
        sql.jobs().filter(
            wait_name=OuterRef("name"), wait_key=OuterRef("key"), delivered__isnull=False
        )
    )
    while True:
        with transaction.atomic(using=sql.alias()):
            ids = list(
                events()
                .filter(created_at__lt=emitted_before)
                .exclude(pointed_at)
                .order_by("created_at")
                .values_list("id", flat=True)[:batch_size]
            )
            if ids:
                events().filter(id__in=ids).delete()
        total += len(ids)
        if len(ids) < batch_size:
            break
    same = {"name": OuterRef("name"), "key": OuterRef("key")}
    EventChannel.objects.using(sql.alias()).exclude(Exists(events().filter(**same))).exclude(
        Exists(sql.jobs().filter(wait_name=OuterRef("name"), wait_key=OuterRef("key")))
    ).delete()
    return total


def parked_counts(*, now: datetime) -> dict[str, int]:
    """How many pending jobs are parked and not yet runnable: sleeping, and waiting for
    an event (counted apart from the pending backlog)."""
    rows = (
        sql.jobs()
        .filter(
            sql.EVERY_PRIORITY,
            status=Status.PENDING,
            parked__in=("sleep", "event"),
            visible_at__gt=now,
        )
        .values("parked")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = {"sleep": 0, "event": 0}
    for row in rows:
        counts[row["parked"]] = row["n"]
    return counts
