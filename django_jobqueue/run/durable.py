"""Durable steps: ``ctx.step``, ``ctx.sleep`` and ``ctx.wait_for`` for one run.

Each of a job's durable steps is recorded as a row of its own (``StepRecord``), written
under the job row's guard (the one every settlement uses) in one write, so a run that
lost its claim records nothing. A later run of the job
replays: a recorded step returns its stored result without running, a recorded sleep
or wait is passed; the code between steps runs again. A sleep or a wait parks the job
(pending, not runnable before its time) in the same guarded transaction that ends the
run, so the run ends without a failure and the slot is free. Inside a transaction (an
atomic task, or the task's own ``transaction.atomic()``) a step runs in a savepoint
with its record: its writes and its record commit together or not at all.

Each step, sleep and wait is met in order by ``run.sequence``, which raises
``StepDivergence`` when a replay meets another sequence than the job recorded; a
``ctx.patched`` decision is a record too, read back on every replay.

Steps inside steps are refused (``StepError``): a step is the unit that runs once, and
a recorded inner step of an outer one that ran again would make "once" mean nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.utils import timezone

from django_jobqueue import conf, validation
from django_jobqueue.errors import ClaimLost, InvalidStep, StepError
from django_jobqueue.rules.control import Parked
from django_jobqueue.rules.lifecycle import LATEST, clamped, later, paused
from django_jobqueue.run import logs
from django_jobqueue.run.events import wait_args
from django_jobqueue.run.executor import output_problem, run_of
from django_jobqueue.run.sequence import Sequence
from django_jobqueue.run.streams import StreamWriter
from django_jobqueue.store import durable as stored

if TYPE_CHECKING:
    from django_jobqueue.run.context import Context
    from django_jobqueue.store import Claimed

STEP_NAME_MAX = 200


@dataclass(frozen=True, slots=True)
class Begun:
    """A step met for the first time: to run, then to record with its name, its place in
    the sequence (``mark``) and when it started."""

    name: str
    mark: dict[str, Any]
    started: datetime


@dataclass(frozen=True, slots=True)
class Replayed:
    """A step met that the job recorded: its recorded result, returned without running."""

    result: Any


@dataclass
class Hooks:
    """What the run's settler is told: the claim was lost, or the run parked its job."""

    lost: Callable[[], ClaimLost]
    parked: Callable[[], None]


class StepBook:
    """One run's durable steps: the job's records (read on first use), the names this
    run used, and the steps it recorded (for its journal entry)."""

    def __init__(
        self, *, alias: str, worker_id: str, job: Claimed, ctx: Context, limit: int, hooks: Hooks
    ) -> None:
        self.alias = alias
        self.worker_id = worker_id
        self.job = job
        self.ctx = ctx
        self.limit = limit
        self.hooks = hooks
        self.began = time.monotonic()
        self._book: stored.Book | None = None
        self.records: list[dict[str, Any]] = []
        self._index: dict[tuple[str, str], dict[str, Any]] = {}
        self.used: set[str] = set()
        self.sleeps = 0
        self.waits = 0
        self.inside: str | None = None
        self.recorded: list[str] = []  # what this run recorded, for its journal note
        self.size = 0  # the records' total JSON size, counted once on load, then added to
        self.parking: Any = None  # the paused settlement a sleep or a wait wrote

    # Made on first use: most runs record no step and write no stream, and a book is
    # made for every run (a no-op's run paid for both before a single step).
    @cached_property
    def sequence(self) -> Sequence:
        """Where each step was recorded."""
        return Sequence(self.job.kind, self.job.id)

    @cached_property
    def stream(self) -> StreamWriter:
        """``ctx.stream``: a step's writes go with its record."""
        return StreamWriter(self)

    # --- reading ---------------------------------------------------------------------

    @property
    def lost(self) -> Callable[[], ClaimLost]:
        """The error of a lost claim, made (what ``StreamWriter`` raises)."""
        return self.hooks.lost

    def _load(self) -> stored.Book:
        if self._book is None:
            book = stored.load(job_id=self.job.id)
            if book is None:
                raise self.hooks.lost()
            unreadable = next((r for r in book.steps if not _readable(r)), None)
            if unreadable is not None:
                raise StepError(
                    f"{self.job.kind}: job {self.job.id}'s stored steps cannot be read "
                    f"(a record {unreadable!r:.200}): no step can be replayed",
                    kind=self.job.kind,
                    job_id=self.job.id,
                )
            self.records = list(book.steps)
            self.size = book.size
            self._index = {(r["kind"], r["name"]): r for r in self.records}
            self.sequence.load(self.records)
            self._book = book
        return self._book

    def _found(self, kind: str, name: str) -> dict[str, Any] | None:
        self._load()
        return self._index.get((kind, name))

    def summary(self) -> str:
        """The journal note's line for what this run recorded ("" for nothing)."""
        if not self.recorded:
            return ""
        return "steps recorded: " + ", ".join(self.recorded)

    # --- steps -----------------------------------------------------------------------

    def step(
        self, name: Any, fn: Callable[..., Any], args: Any, kwargs: Any, version: Any = None
    ) -> Any:
        begun = self.begin(name, fn, version)
        if not isinstance(begun, Begun):
            return begun.result
        self.inside = begun.name
        try:
            if connections[self.alias].in_atomic_block:
                with transaction.atomic(using=self.alias):
                    return self._run_step(begun, fn, args, kwargs)
            return self._run_step(begun, fn, args, kwargs)
        finally:
            self.inside = None
            self.stream.take()  # a step that raised stores none of its writes

    def begin(
        self,
        name: Any,
        fn: Callable[..., Any],
        version: Any,
        *,
        what: str = "ctx.step",
        held: bool = False,
    ) -> Begun | Replayed:
        """A step met: its arguments checked, its place in the sequence taken; either
        its record (``Replayed``: the step is not run) or what ``finish`` records it
        with (``Begun``). The one definition of a step's rules, for ``step`` and
        ``astep`` alike (the async side calls it on its ORM thread, ``held``: having
        checked and taken ``inside`` itself, on the loop)."""
        name = validation.bounded_text(
            name, name="the step name", error=_invalid_step("name"), max_length=STEP_NAME_MAX
        )
        version = _version(name, version)
        if not callable(fn):
            raise InvalidStep(f"{what}({name!r}, …): fn must be callable, got {fn!r}")
        if name in self.used:
            raise StepError(
                f"{self.job.kind}: step {name!r} is used twice in one run; step names must "
                "be unique within a run",
                kind=self.job.kind,
                job_id=self.job.id,
            )
        self.used.add(name)
        done = self._found("step", name)
        if not held:
            self._not_inside(f"{what}({name!r})")
        seq = self.sequence.meet(done, name, version)
        if done is not None:
            return Replayed(done.get("result"))
        mark = {"seq": seq} if version is None else {"seq": seq, "version": version}
        return Begun(name, mark, timezone.now())

    def _run_step(self, begun: Begun, fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
        began = time.monotonic()
        value = fn(*args, **kwargs)
        self.finish(begun, value, time.monotonic() - began)
        return value

    def finish(self, begun: Begun, value: Any, took: float) -> None:
        """Record a step that ran (``took`` seconds) with its result ``value``."""
        name = begun.name
        problem = output_problem(value, f"the result of step {name!r}", self.limit)
        if problem is not None:
            raise InvalidStep(f"{self.job.kind}: {problem}", argument=name, job_id=self.job.id)
        record = {
            "kind": "step",
            "name": name,
            "result": value,
            "at": begun.started.isoformat(),
            "seconds": round(took, 6),
            "run": self.job.run_count,
            **begun.mark,
        }
        self._write(record)
        self.recorded.append(f"{name} ({took:.3f} s)")

    def _write(self, record: dict[str, Any], *, clear_wait: bool = True) -> None:
        """Record one step by a guarded write; a lost claim records nothing and raises.
        ``clear_wait=False`` (a patch decision) leaves a parked wait's columns, which
        the wait reads when the replay reaches it."""
        book = self._load()
        text = self._within_bound(record)
        parking = bool(book.parked or book.wait_name or book.delivered is not None)
        clear = clear_wait and parking
        written = self.stream.take()
        if not stored.record(
            job_id=self.job.id,
            run_no=self.job.run_count,
            worker_id=self.worker_id,
            text=text,
            clear_wait=clear,
            stream=written,
        ):
            raise self.hooks.lost()
        self.stream.stored(written)
        if clear:  # the write cleared the parking: the run is past its sleep or wait
            self._book = stored.Book(self.records, "", None, None, None, None)
        self.records.append(record)
        self.size += len(text)
        self._index[(record["kind"], record["name"])] = record
        self.sequence.add(record)

    def _within_bound(self, record: dict[str, Any]) -> str:
        """The record's JSON text, refused (InvalidStep, nothing written) when it would
        take the job past MAX_STEPS records or MAX_STEPS_BYTES in all: MAX_OUTPUT_BYTES
        bounds each result, and a loop of steps would otherwise grow a job's row without
        end. Raised in the task, so the run fails as any exception does."""
        settings = conf.get()
        name, count = record["name"], len(self.records) + 1
        if count > settings.max_steps:
            raise InvalidStep(
                f"{self.job.kind}: recording {record['kind']} {name!r} would make "
                f"{count:,} recorded steps, over MAX_STEPS ({settings.max_steps:,})",
                argument=name,
                job_id=self.job.id,
            )
        text = validation.dumps(record)
        size = len(text)
        if self.size + size > settings.max_steps_bytes:
            raise InvalidStep(
                f"{self.job.kind}: recording {record['kind']} {name!r} ({size:,} bytes) "
                f"would make the recorded steps {self.size + size:,} bytes of JSON, over "
                f"MAX_STEPS_BYTES ({settings.max_steps_bytes:,})",
                argument=name,
                job_id=self.job.id,
            )
        return text

    # --- patches ---------------------------------------------------------------------

    def patched(self, change_id: Any, *, deprecated: bool = False) -> bool:
        """Whether this run takes the code path of ``change_id``: True unless the job's
        records already go past this point (a run recorded before the change), decided
        once and recorded, so every replay decides the same. ``deprecated`` (the
        change's old path is gone): a run recorded before it raises StepDivergence."""
        what = "ctx.deprecate_patch()" if deprecated else "ctx.patched()"
        change = validation.bounded_text(
            change_id,
            name=f"{what}'s change id",
            error=_invalid_step("change_id"),
            max_length=STEP_NAME_MAX,
        )
        found = self._found("patch", change)
        if found is not None:
            decision = found.get("result") is True
        else:
            self._not_inside(f"{what[:-2]}({change!r})")
            decision = not self.sequence.replaying()
            if decision or not deprecated:
                record = {"kind": "patch", "name": change, "result": decision, **self._when()}
                self._write({**record, "seq": self.sequence.position}, clear_wait=False)
                self.recorded.append(f"patch {change} ({'new' if decision else 'old'} code)")
        if deprecated and not decision:
            self.sequence.diverged(
                f"patch {change}",
                "this run was recorded before the change, whose old code path "
                "ctx.deprecate_patch() says is gone",
            )
        return decision

    def _not_inside(self, what: str) -> None:
        if self.inside is not None:
            raise StepError(
                f"{self.job.kind}: {what} is called inside step {self.inside!r}; steps, "
                "sleeps and waits cannot be nested in a step (nor, in an async task, run "
                "while one runs: asyncio.gather of steps is refused too)",
                kind=self.job.kind,
                job_id=self.job.id,
            )

    # --- sleeps ----------------------------------------------------------------------

    def sleep(self, duration: Any) -> None:
        wait = validation.duration(duration, name="ctx.sleep() duration", error=_invalid_sleep)
        self.sleep_until(later(timezone.now(), wait), checked=True)

    def sleep_until(self, moment: Any, *, checked: bool = False) -> None:
        if not checked:
            if not isinstance(moment, datetime) or timezone.is_naive(moment):
                raise InvalidStep(
                    f"ctx.sleep_until() takes an aware datetime, got {moment!r}",
                    argument="moment",
                )
            moment = clamped(moment)
        self.sleeps += 1
        name = f"sleep {self.sleeps}"
        found = self._found("sleep", name)
        self._not_inside("ctx.sleep()")
        seq = self.sequence.meet(found, name)
        if found is not None:
            return
        record = {"kind": "sleep", "name": name, "until": moment.isoformat(), **self._when()}
        record["seq"] = seq
        self._within_bound(record)
        note = f"sleeping until {moment:%Y-%m-%d %H:%M:%S%z}"
        parking = stored.Parking(record=record, parked="sleep", wake_at=moment)
        settlement = self.parking = self._paused(moment, note)
        applied = stored.park(settlement=settlement, parking=parking)
        self._parked(applied, note)

    # --- waits -----------------------------------------------------------------------

    def wait_for(self, name: Any, key: Any, timeout: Any) -> Any:
        name, key, wait = wait_args(name, key, timeout)
        self.waits += 1
        label = f"wait {self.waits}"
        done = self._found("wait", label)
        self._not_inside(f"ctx.wait_for({name!r})")
        self.sequence.meet(done, label)
        if done is not None:
            return done.get("payload")
        book = self._load()
        delivered = book.delivered
        if isinstance(delivered, dict) and (delivered.get("name"), delivered.get("key")) == (
            name,
            key,
        ):
            if "payload" not in delivered:  # its event's row is gone: say so, record nothing
                raise StepError(
                    f"{self.job.kind}: job {self.job.id} was delivered event "
                    f"{delivered.get('event')!r} ({name!r} key {key!r}), whose row no longer "
                    "exists: its payload cannot be read",
                    kind=self.job.kind,
                    job_id=self.job.id,
                )
            return self._waited(label, name, key, delivered.get("event"), delivered["payload"])
        resumed = book.wait_name == name and book.wait_key == key and book.parked == "event"
        if resumed and book.wake_at is not None and (book.visible_at or LATEST) >= book.wake_at:
            return self._waited(label, name, key, None, None)  # timed out
        if resumed:
            deadline = book.wake_at
        else:
            deadline = None if wait is None else later(timezone.now(), wait)
        return self._park_for(label, name, key, deadline)

    def _park_for(self, label: str, name: str, key: str, deadline: datetime | None) -> Any:
        until = "" if deadline is None else f" until {deadline:%Y-%m-%d %H:%M:%S%z}"
        note = f"waiting for event {name!r} key {key!r}{until}"
        parking = stored.Parking(
            record=None,
            parked="event",
            wake_at=deadline,
            wait_name=name,
            wait_key=key,
        )
        taken = [r["event_id"] for r in self.records if r.get("event_id") is not None]
        self.parking = self._paused(deadline or LATEST, note)
        found = stored.wait(
            settlement=self.parking,
            parking=parking,
            since=timezone.now() - conf.get().event_retention,
            taken=taken,
        )
        if isinstance(found, tuple):
            event_id, payload = found
            return self._waited(label, name, key, event_id, payload)
        self._parked(found, note)

    def _waited(self, label: str, name: str, key: str, event_id: Any, payload: Any) -> Any:
        record = {
            "kind": "wait",
            "name": label,
            "event": name,
            "key": key,
            "event_id": event_id,
            "payload": payload,
            "timed_out": event_id is None,
            **self._when(),
            "seq": self.sequence.position - 1,  # met just before: nothing is met between
        }
        self._write(record)
        self.recorded.append(f"{label} ({'timed out' if event_id is None else 'event'})")
        return payload

    # --- parking ---------------------------------------------------------------------

    def _when(self) -> dict[str, Any]:
        return {"at": timezone.now().isoformat(), "run": self.job.run_count}

    def _paused(self, resume_at: datetime, note: str) -> Any:
        carry = self.ctx.carry
        problem = output_problem(carry, "ctx.carry", self.limit, own_level=True)
        if not isinstance(carry, dict) or problem is not None:
            raise InvalidStep(
                f"{self.job.kind}: {problem or 'ctx.carry must be a dict'}", argument="carry"
            )
        duration = timedelta(seconds=time.monotonic() - self.began)
        which = run_of(
            self.job,
            worker=self.worker_id,
            started_at=timezone.now() - duration,
            duration=duration,
            attachment=self.ctx.attachment,
            logs=logs.current(),
        )
        full = "\n".join(p for p in (note, self.summary()) if p)
        return paused(which, resume_at=resume_at, carry=carry, note=full)

    def _parked(self, applied: bool, note: str) -> None:
        if not applied:
            raise self.hooks.lost()
        self.hooks.parked()
        raise Parked(note)


def _readable(record: Any) -> bool:
    """Whether a stored record is one this module wrote (a dict naming its kind and
    name); anything else (written around the queue, or carried over by migration 0022
    from a list that could not be read) stops the replay, never guessed past."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("kind"), str)
        and isinstance(record.get("name"), str)
    )


def _invalid_step(argument: str) -> Callable[[str], InvalidStep]:
    return lambda message: InvalidStep(message, argument=argument)


def _version(name: str, version: Any) -> Any:
    """A step's ``version=``: None, an int or a short string, compared by equality."""
    if version is None or (isinstance(version, int) and not isinstance(version, bool)):
        return version
    return validation.bounded_text(
        version,
        name=f"step {name!r}'s version",
        error=_invalid_step("version"),
        max_length=STEP_NAME_MAX,
    )


def _invalid_sleep(message: str) -> InvalidStep:
    return InvalidStep(message, argument="duration")
