"""Tasks the tests enqueue; each ending of the lifecycle table has one."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from django_jobqueue import (
    Backoff,
    Context,
    Merge,
    Pause,
    Pending,
    Permanent,
    Priority,
    SoftTimeLimitExceeded,
    Task,
    task,
)
from tests.taskapp.models import Execution


def _record(ctx: Context) -> Execution:
    return Execution.objects.create(
        job_id=ctx.job_id,
        kind=ctx.kind,
        run_no=ctx.run_count,
        pid=os.getpid(),
        thread=threading.current_thread().name,
    )


@task
def noop() -> None:
    return None


@task
def collector() -> list[int]:
    """The collector of the process running it (``worker.heap``): how many objects it
    keeps out of its walks, and its youngest generation's threshold."""
    return [gc.get_freeze_count(), gc.get_threshold()[0]]


@task
def add(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
def record(ctx: Context, n: int = 0) -> int:
    """Writes an Execution row per start, so tests can count runs independently of the journal."""
    _record(ctx)
    return n


@task(takes_context=True)
def fail_times(ctx: Context, times: int) -> str:
    ctx.attach({"run": ctx.run_count})
    if ctx.failure_count < times:
        raise RuntimeError(f"planned failure {ctx.failure_count + 1} of {times}")
    return "ok"


@task(max_failures=3)
def always_fails() -> None:
    raise ValueError("this always fails")


@task(max_failures=None)
def fails_forever() -> None:
    raise ValueError("unlimited retries")


@task
def permanent(reason: str = "bad input") -> None:
    raise Permanent(reason)


@task(takes_context=True)
def paginate(ctx: Context, pages: int) -> dict[str, int]:
    page = ctx.carry.get("page", 0) + 1
    ctx.carry["page"] = page
    if page < pages:
        raise Pause(resume_in=timedelta(0), note=f"page {page}")
    return {"pages": page}


@task(takes_context=True)
def pause_later(ctx: Context, seconds: float) -> None:
    ctx.carry["paused"] = True
    raise Pause(resume_in=timedelta(seconds=seconds), note="later")


@task
def returns_unserialisable() -> Any:
    return object()


@task
async def async_add(a: int, b: int) -> int:
    return a + b


@task(takes_context=True)
def cooperative(ctx: Context, seconds: float) -> str:
    """Works in small steps; when asked to stop it pauses, keeping its progress in carry."""
    _record(ctx)
    steps = ctx.carry.get("steps", 0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ctx.cancelled.is_set():
            ctx.carry["steps"] = steps
            raise Pause(resume_in=timedelta(0), note="stopping early")
        time.sleep(0.05)
        steps += 1
    return "done"


@task(takes_context=True)
def stubborn(ctx: Context, seconds: float) -> str:
    """Ignores cancellation."""
    _record(ctx)
    ctx.carry["touched"] = True
    time.sleep(seconds)
    return "done"


@task(takes_context=True, lease=timedelta(seconds=2))
def short_lease_sleep(ctx: Context, seconds: float) -> str:
    """A job with a 2 s lease: killing its worker lets another recover it quickly."""
    execution = _record(ctx)
    if ctx.run_count == 1:
        time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])
    return "finished"


@task(takes_context=True, kind="tests.capped")
def capped(ctx: Context, seconds: float) -> None:
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@task(takes_context=True, backoff=Backoff(base=timedelta(seconds=30), cap=timedelta(minutes=5)))
def slow_backoff(ctx: Context) -> None:
    raise RuntimeError("retry me later")


@task(priority=Priority.HIGH)
def high() -> None:
    return None


@task(priority=Priority.LOW)
def low() -> None:
    return None


@dataclass
class Sync(Task):
    """A class-based task that merges with a pending job of the same account."""

    kind = "tests.sync"
    account_id: int
    full: bool = False
    items: tuple[str, ...] | list[str] = ()

    def dedup_key(self) -> str | None:
        return str(self.account_id)

    def merge(self, existing: Pending) -> Merge:
        assert isinstance(existing.task, Sync)
        mode = MERGE_MODE.get("mode", "union")
        if mode == "keep":
            return Merge.keep()
        if mode == "replace":
            return Merge.replace()
        if mode == "independent":
            return Merge.independent()
        if mode == "raise":
            raise RuntimeError("merge exploded")
        if mode == "bad":
            return "nonsense"  # type: ignore[return-value]
        if mode == "bad carry":
            return Merge.with_(self, carry={"seen": {1, 2}})
        union = sorted(set(existing.task.items) | set(self.items))
        return Merge.with_(
            Sync(self.account_id, full=existing.task.full or self.full, items=union),
            carry={**existing.carry, "merged": existing.carry.get("merged", 0) + 1},
        )

    def run(self, ctx: Context) -> dict[str, Any]:
        return {"account": self.account_id, "items": list(self.items), "full": self.full}


MERGE_MODE: dict[str, str] = {}


@dataclass
class NoRun(Task):
    """A Task subclass that forgot run(): not registered, so not enqueueable."""

    n: int = 0


# --- used by tests/concurrency ------------------------------------------------------------


@task(takes_context=True)
def timed_sleep(ctx: Context, seconds: float) -> None:
    """Records its start and finish, so a test can see which runs overlapped."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@task(takes_context=True, lease=timedelta(seconds=3))
def short_lease_step(ctx: Context, seconds: float) -> None:
    """A short step with a 3 s lease: a claim lost to a dropped connection heals quickly."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


FIXED: set[str] = set()
"""Tickets an "operator" has fixed: until_fixed jobs for them complete instead of dying."""


@task(takes_context=True)
def until_fixed(ctx: Context, ticket: str) -> dict[str, int]:
    """Saves progress in carry (a pause), then dies permanently until its ticket is FIXED."""
    _record(ctx)
    if "prepared" not in ctx.carry:
        ctx.carry["prepared"] = ctx.run_count
        raise Pause(resume_in=timedelta(0), note="prepared")
    if ticket not in FIXED:
        raise Permanent(f"ticket {ticket} is not fixed")
    return {"prepared_in_run": ctx.carry["prepared"], "run": ctx.run_count}


@dataclass
class ClaimingSync(Task):
    """Merges by replace, but a worker claims the candidate while merge() is deciding.

    This opens the window between finding a candidate and writing to it, which row
    locks (PostgreSQL) and serialised writers (SQLite) otherwise keep closed to other
    sessions: the guarded write must then fall back to a fresh insert.
    """

    kind = "tests.claiming_sync"
    account_id: int

    def dedup_key(self) -> str | None:
        return str(self.account_id)

    def merge(self, existing: Pending) -> Merge:
        from django_jobqueue import store

        store.claim_jobs(
            worker_id="interloper:1", request=store.ClaimRequest(limit=1, kinds=[self.kind])
        )
        return Merge.replace()

    def run(self, ctx: Context) -> int:
        return self.account_id


@task(max_failures=1)
def exits() -> None:
    """Calls sys.exit() from inside a job."""
    raise SystemExit(3)


# --- bad output: nothing a task hands back may break its settlement ----------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


MISBEHAVIOURS: dict[str, Callable[[Context], Any]] = {
    "returns a NUL": lambda ctx: "a\x00b",
    "returns a lone surrogate": lambda ctx: {"k": "\ud800"},
    "returns a key with a NUL": lambda ctx: {"k\x00": 1},
    "returns what is not JSON": lambda ctx: {1, 2},
    "returns NaN": lambda ctx: float("nan"),
    "returns JSON nested too deeply": lambda ctx: _nested(200_000),
    "carries a NUL": lambda ctx: ctx.carry.update(x="\x00"),
    "carries what is not a dict": lambda ctx: setattr(ctx, "carry", 5),
    "attaches a lone surrogate": lambda ctx: ctx.attach(["\udfff"]),
    "raises a NUL": lambda ctx: _raise(ValueError("bad\x00message\ud800")),
    "raises what cannot be printed": lambda ctx: _raise(Unprintable()),
    "raises a huge message": lambda ctx: _raise(ValueError("x" * 1_000_000)),
    "raises a class named with a NUL": lambda ctx: _raise(type("Bad\x00Name", (Exception,), {})()),
    "pauses with a NUL note": lambda ctx: _raise(Pause(note="p\x00\ud800")),
    "pauses with a note that is not text": lambda ctx: _raise(Pause(note=[1, 2])),  # type: ignore[arg-type]
    "permanent with a NUL reason": lambda ctx: _raise(Permanent("r\x00")),
    "returns too much": lambda ctx: "x" * 5000,
}


def _raise(exc: BaseException) -> None:
    raise exc


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


@task(takes_context=True, max_failures=1, kind="tests.misbehave")
def misbehave(ctx: Context, how: str) -> Any:
    """Hands back what the databases refuse, or raises what cannot be printed; at most
    one run (max_failures=1), so each job ends dead, or paused for a Pause."""
    return MISBEHAVIOURS[how](ctx)


@task(takes_context=True, max_failures=1, kind="tests.refused")
def refused(ctx: Context) -> str:
    """Completes; a test's trigger makes the database refuse that completion."""
    return "done"


@task(takes_context=True, timeout=timedelta(seconds=0.5), max_failures=2, kind="tests.overrun")
def overrun(ctx: Context, seconds: float, cooperative: bool) -> str:
    """Runs past its 0.5 s timeout; a cooperative run stops once its worker gives up on it."""
    if cooperative:
        ctx.cancelled.wait(seconds)
    else:
        time.sleep(seconds)
    return "late"


# --- fuzzing: a task that hands back whatever a test put here ------------------------------

OUTPUTS: dict[str, tuple[str, Any]] = {}
"""key -> (where, value): where the echo task puts the value (returns it, carries it
into a pause, attaches it, raises it as an exception's message, or pauses with it as
the note)."""


@task(takes_context=True, max_failures=1, kind="tests.echo")
def echo(ctx: Context, key: str) -> Any:
    where, value = OUTPUTS.pop(key)
    if where == "carry":
        ctx.carry["value"] = value
        raise Pause(resume_in=3600, note="carry kept")  # a pause stores the carry
    elif where == "attach":
        ctx.attach(value)
    elif where == "raise":
        raise ValueError(value)
    elif where == "pause":
        raise Pause(resume_in=3600, note=value)
    return value if where == "return" else None


# --- used by tests/chaos ------------------------------------------------------------------


@task(takes_context=True, kind="tests.chaos", lease=timedelta(seconds=3), max_failures=None)
def chaos_step(ctx: Context, seconds: float) -> int:
    """Records this execution in its own table and its own transaction, then works a while.

    A 3 s lease brings a killed worker's job back quickly; no backstop (max_failures
    None), because the campaign checks delivery, and a job that dies of many kills
    would say nothing about it.
    """
    with transaction.atomic():
        _record(ctx)
    time.sleep(seconds)
    return ctx.run_count


@task(takes_context=True, kind="tests.chaos_atomic", lease=timedelta(seconds=3), atomic=True)
def chaos_atomic(ctx: Context, seconds: float) -> int:
    """The chaos campaign's atomic task: one Effect row per run, written in the run's own
    transaction, then a while of work before the run commits with its completion."""
    _effect(ctx)
    time.sleep(seconds)
    return ctx.run_count


# --- used by the workflow chaos campaign (tests/chaos/workflow_campaign.py) --------------


@task(takes_context=True, kind="tests.wf_chaos", lease=timedelta(seconds=3), max_failures=None)
def wf_chaos_member(ctx: Context, seconds: float, value: int) -> int:
    """A workflow's member or inner step: records this execution in its own transaction
    (its start time is checked against its parents' completions), works, returns ``value``
    for the join to add up."""
    with transaction.atomic():
        _record(ctx)
    time.sleep(seconds)
    return value


@task(
    takes_context=True,
    kind="tests.wf_chaos_join",
    lease=timedelta(seconds=3),
    atomic=True,
    max_failures=None,
)
def wf_chaos_join(ctx: Context, seconds: float) -> dict[str, Any]:
    """A join (a diamond's last step, a chord's callback): an atomic task, so its one
    Effect row commits only with its completing run; returns what it read of its
    parents, for the campaign to check ``ctx.parents`` whole."""
    _effect(ctx)
    parents = dict(ctx.parents)
    time.sleep(seconds)
    return {"parents": sorted(parents), "sum": sum(int(v) for v in parents.values())}


# --- atomic tasks (tests/db/test_atomic.py) ----------------------------------------------

# Gates a test holds a first run at: the run sets ``started``, then waits for ``go``.
ATOMIC_STARTED: dict[str, threading.Event] = {}
ATOMIC_GO: dict[str, threading.Event] = {}


def atomic_gate(name: str) -> tuple[threading.Event, threading.Event]:
    """The (started, go) events of a gate, made fresh."""
    ATOMIC_STARTED[name] = threading.Event()
    ATOMIC_GO[name] = threading.Event()
    return ATOMIC_STARTED[name], ATOMIC_GO[name]


def _effect(ctx: Context) -> None:
    from tests.taskapp.models import Effect

    Effect.objects.create(job_id=ctx.job_id, run_no=ctx.run_count, worker=ctx.claimed.claimed_by)


@task(takes_context=True, kind="tests.atomic", atomic=True, max_failures=5)
def atomic_effect(
    ctx: Context,
    fail_first: int = 0,
    gate: str = "",
    write_first: bool = False,
    hold: float = 0.0,
    until_cancelled: bool = False,
) -> int:
    """Writes one Effect row in its run's transaction and completes with it.

    ``fail_first`` runs fail after writing; ``gate`` holds the first run (after its write
    if ``write_first``) until the test opens it; ``hold`` keeps the transaction open
    that long after the write; ``until_cancelled`` waits (after the write if
    ``write_first``, else before it) for the worker to set ``ctx.cancelled``, then
    pauses."""
    if write_first:
        _effect(ctx)
    if gate and ctx.run_count == 1:
        ATOMIC_STARTED[gate].set()
        ATOMIC_GO[gate].wait(30)
    if until_cancelled and not ctx.cancelled.wait(30):
        raise RuntimeError("never cancelled")
    if not write_first:
        _effect(ctx)
    if hold:
        time.sleep(hold)
    if until_cancelled:
        raise Pause(resume_in=0, note="asked to stop")
    if ctx.failure_count < fail_first:
        raise RuntimeError(f"planned failure {ctx.failure_count + 1} of {fail_first}")
    return ctx.run_count


@task(takes_context=True, kind="tests.atomic_pause", atomic=True)
def atomic_pause(ctx: Context) -> dict[str, Any]:
    """Writes, then pauses on its first run (rolling the write back, keeping the carry)."""
    _effect(ctx)
    ctx.carry["seen"] = [*ctx.carry.get("seen", []), ctx.run_count]
    if ctx.run_count == 1:
        raise Pause(resume_in=0, note="first page")
    return {"seen": ctx.carry["seen"]}


@task(takes_context=True, kind="tests.atomic_permanent", atomic=True)
def atomic_permanent(ctx: Context) -> None:
    _effect(ctx)
    raise Permanent("cannot ever work")


@task(takes_context=True, kind="tests.settle_now")
def settles_now(ctx: Context, how: str) -> Any:
    """A plain task that commits its write and its completion with ``ctx.settle_now()``."""
    if how == "outside":
        ctx.settle_now("no transaction")
        return "unreachable"
    with transaction.atomic():
        _effect(ctx)
        if how == "ok":
            ctx.settle_now({"paid": True})
        elif how == "twice":
            ctx.settle_now(1)
            ctx.settle_now(2)
        elif how == "unstorable":
            ctx.settle_now({"when": object()})
        elif how == "then_fail":
            ctx.settle_now("done")
            raise RuntimeError("failed after settle_now")
    return "returned after settle_now"


@task(takes_context=True, kind="tests.atomic_early", atomic=True)
def atomic_settles_early(ctx: Context) -> str:
    """An atomic task that settles before it returns: the early result is the one kept."""
    _effect(ctx)
    ctx.settle_now("early")
    return "late"


@task(takes_context=True, kind="tests.atomic_swallows", atomic=True, max_failures=1)
def atomic_swallows_an_error(ctx: Context) -> str:
    """Writes, then swallows a failed statement without a savepoint of its own."""
    from django.db import DatabaseError, connection

    _effect(ctx)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_at_all")
    except DatabaseError:
        pass
    return "carried on"


@task
def countdown(n: int) -> int:
    """Enqueues ``countdown(n - 1)`` until n reaches 0: jobs that enqueue jobs."""
    if n > 0:
        countdown.enqueue(n - 1)
    return n


# --- global limits (tests/db/test_limits.py, tests/concurrency/test_limits.py) -------------


@task(takes_context=True, kind="tests.limited")
def limited(ctx: Context, seconds: float) -> None:
    """No limit of its own: the tests set one in the database or the settings."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@task(takes_context=True, kind="tests.one_at_a_time", max_in_flight=1)
def one_at_a_time(ctx: Context, seconds: float) -> None:
    """At most one claimed at once, all workers together (the task's own option)."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


# --- per-key limits and fairness (tests/fairness) ---------------------------------------


@task(kind="tests.keyed")
def keyed(n: int = 0) -> int:
    """No per-key rule of its own: the tests set them in the settings or the database."""
    return n


@task(
    takes_context=True,
    kind="tests.per_shop",
    key=lambda shop, **_: f"shop:{shop}",
    max_in_flight_per_key=2,
)
def per_shop(ctx: Context, shop: int, seconds: float) -> None:
    """At most two claimed per shop, all workers together; records its start and finish."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@task(takes_context=True, kind="tests.in_order", key=lambda shop, **_: f"shop:{shop}", ordered=True)
def in_order(ctx: Context, shop: int, seq: int, seconds: float) -> None:
    """One at a time per shop, in enqueue order; records its start and finish."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])


@task(takes_context=True, kind="tests.unique_running", max_in_flight_per_key=1)
def unique_running(ctx: Context, n: int, seconds: float) -> int:
    """One at a time per key (the key being the dedup key of ``while_running="wait"``
    enqueues); records its start and finish."""
    execution = _record(ctx)
    time.sleep(seconds)
    execution.finished_at = timezone.now()
    execution.save(update_fields=["finished_at"])
    return n


@task(kind="tests.rated_per_key", rate_limit_per_key="2/m")
def rated_per_key(n: int = 0) -> int:
    """Two enqueues a minute per key."""
    return n


@task(kind="tests.rated", rate_limit="3/m")
def rated(n: int = 0) -> int:
    """Three enqueues a minute, all processes together."""
    return n


@dataclass
class RatedSync(Task):
    """A class task whose rate limit is a class attribute."""

    kind = "tests.rated_sync"
    rate_limit = "2/h"
    account_id: int

    def run(self, ctx: Context) -> int:
        return self.account_id


# --- every run starts on a clean connection (issue 17, package "conn") ---------------------


@task(takes_context=True, kind="tests.leaks", max_failures=1)
def leaks(ctx: Context, how: str) -> str:
    """Writes an Effect row in a transaction it leaves open: ``autocommit`` turns
    autocommit off, ``atomic`` enters an atomic block and never leaves it,
    ``settle_now`` settles inside a block it then leaves with an inner one still open."""
    from django.db import connections

    if how == "autocommit":
        connections["default"].set_autocommit(False)
        _effect(ctx)
    elif how == "atomic":
        transaction.atomic().__enter__()
        _effect(ctx)
    elif how == "settle_now":
        with transaction.atomic():
            _effect(ctx)
            ctx.settle_now("settled")
            transaction.atomic().__enter__()
    return how


@task(takes_context=True, kind="tests.atomic_leaks", atomic=True, max_failures=1)
def atomic_leaks(ctx: Context) -> str:
    """An atomic task that writes inside an inner atomic block it never exits."""
    transaction.atomic().__enter__()
    _effect(ctx)
    return "leaked"


@task(takes_context=True, kind="tests.writes")
def writes(ctx: Context) -> int:
    """A plain task that writes one Effect row (autocommit, as configured)."""
    _effect(ctx)
    return ctx.run_count


@task(kind="tests.runs_sql")
def runs_sql(sql: str) -> None:
    """Runs a statement on the default connection (a SET, say) and returns."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)


@task(takes_context=True, kind="tests.atomic_reads", atomic=True, max_failures=1)
def atomic_reads(ctx: Context, sql: str) -> str:
    """An atomic task that writes an Effect row and returns one value ``sql`` reads."""
    from django.db import connection

    _effect(ctx)
    with connection.cursor() as cursor:
        cursor.execute(sql)
        row = cursor.fetchone()
    return str(row[0])


@task(kind="tests.breaks_connection")
def breaks_connection() -> None:
    """Closes the driver's connection under Django's feet (Django still thinks it open)."""
    from django.db import connection

    connection.ensure_connection()
    connection.connection.close()


@task(kind="tests.forks")
def forks() -> int:
    """Forks; the child returns from the task at once. The parent returns the child's pid."""
    pid = os.fork()
    if pid == 0:
        return 0
    return pid


@task(kind="tests.raises_huge", max_failures=1)
def raises_huge(size: int) -> None:
    raise RuntimeError("x" * size)


# --- issue 17, values package: nothing stored can break a reader -------------------------


@task(takes_context=True, max_failures=1, kind="tests.deep_output")
def deep_output(ctx: Context, where: str, depth: int) -> Any:
    """Hands back a list nested ``depth`` levels deep as its return value, in its carry
    or as its attachment; at most one run, so a refused output ends it dead."""
    value = _nested(depth - 1)
    if where == "carry":
        ctx.carry["deep"] = value
        return None
    if where == "attachment":
        ctx.attach(value)
        return None
    return value


# --- issue 19, workflows ---------------------------------------------------------------


@task(takes_context=True, kind="tests.wf.step")
def wf_step(ctx: Context, label: str = "", fail_times: int = 0, die: bool = False) -> Any:
    """A workflow step: returns its label and what its parents returned; fails its first
    ``fail_times`` runs, or dies at once with ``die``."""
    if die:
        raise Permanent(f"{label} dies")
    if ctx.failure_count < fail_times:
        raise RuntimeError(f"{label}: planned failure {ctx.failure_count + 1} of {fail_times}")
    return {"label": label, "parents": dict(ctx.parents)}


@task(kind="tests.wf.value")
def wf_value(x: int) -> int:
    return x


@task(takes_context=True, kind="tests.wf.total")
def wf_total(ctx: Context) -> int:
    """A chord's callback: the sum of its members' results."""
    return sum(int(v) for v in ctx.parents.values())


@task(takes_context=True, kind="tests.wf.crawl")
def wf_crawl(ctx: Context, page: int, last: int) -> int:
    """A batch member that adds the next page as a member until ``last``."""
    if page < last:
        ctx.batch.add(wf_crawl.s(page=page + 1, last=last))
    return page


@task(takes_context=True, kind="tests.wf.crawl_atomic", atomic=True)
def wf_crawl_atomic(ctx: Context, page: int, last: int, fail_first: bool = False) -> int:
    """As ``wf_crawl``, atomic: its added member commits with its settlement or not at all
    (a failed first run adds nothing)."""
    if page < last:
        ctx.batch.add(wf_crawl_atomic.s(page=page + 1, last=last))
    if fail_first and ctx.failure_count == 0:
        raise RuntimeError("first run fails after adding")
    return page


@task(takes_context=True, kind="tests.wf.summary")
def wf_summary(ctx: Context) -> dict[str, int]:
    """A batch callback: its members' statuses, counted."""
    counts: dict[str, int] = {}
    for member in ctx.batch.members():
        counts[member.status] = counts.get(member.status, 0) + 1
    return counts


@task(takes_context=True, kind="tests.wf.flaky", max_failures=1)
def wf_flaky(ctx: Context, label: str = "") -> str:
    """Dies on its first run (one failure is its most), completes on any later one: a
    step that a requeue puts right."""
    if ctx.run_count == 1:
        raise RuntimeError(f"{label}: the first run fails")
    return label


@task(takes_context=True, kind="tests.wf.record_total")
def wf_record_total(ctx: Context) -> int:
    """A chord's callback that writes an Execution row per start (counted apart from the
    journal) and sums its members' results."""
    _record(ctx)
    return sum(int(v) for v in ctx.parents.values())


@task(max_failures=2, kind="tests.declined")
def declined(message: str) -> None:
    """Fails with ``message``: retried once, then dead."""
    raise ConnectionRefusedError(message)


# --- issue 21: tracing and live progress ---------------------------------------------------


@task(kind="tests.traced")
def traced(name: str) -> None:
    """Makes a span of its own, which should be a child of its run's span."""
    from opentelemetry import trace

    with trace.get_tracer("tests").start_as_current_span(name):
        pass


@task(takes_context=True, kind="tests.progress", lease=timedelta(seconds=60))
def reports_progress(ctx: Context, steps: int, step_seconds: float, calls: int = 1) -> int:
    """Reports ``done = 1 … steps`` of ``steps``, ``calls`` times each, a step every
    ``step_seconds``. Its lease (60 s) is first renewed 20 s after the claim: progress
    seen sooner was written on its own, not with a renewal."""
    for done in range(1, steps + 1):
        for _ in range(calls):
            ctx.progress(done, total=steps, note=f"step {done}")
        if ctx.cancelled.wait(step_seconds):
            break
    return steps


@task(takes_context=True, kind="tests.aprogress", lease=timedelta(seconds=60))
async def reports_progress_async(ctx: Context, steps: int, step_seconds: float) -> int:
    """``reports_progress`` as an ``async def`` task."""
    import asyncio

    for done in range(1, steps + 1):
        ctx.progress(done, total=steps, note=f"async step {done}")
        await asyncio.sleep(step_seconds)
    return steps


@task(takes_context=True, kind="tests.misreports_progress", max_failures=2)
def misreports_progress(ctx: Context, done: float) -> None:
    ctx.progress(done)


class AsyncGauge:
    """What the event-loop tests read off their async runs: how many await at once
    (and the most ever), the thread count at that peak, the runs that were cancelled."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.now = 0
        self.peak = 0
        self.threads_at_peak = 0
        self.cancelled: set[str] = set()
        self.db_threads: set[str] = set()


async_gauge = AsyncGauge()


@task(takes_context=True, kind="tests.async_wait")
async def async_wait(ctx: Context, seconds: float) -> str:
    """Awaits ``seconds``; counts how many do at once, and is told apart when cancelled."""
    import asyncio

    gauge = async_gauge
    gauge.now += 1
    if gauge.now > gauge.peak:
        gauge.peak = gauge.now
        gauge.threads_at_peak = threading.active_count()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        gauge.cancelled.add(str(ctx.job_id))
        raise
    finally:
        gauge.now -= 1
    return "waited"


@task(takes_context=True, kind="tests.async_query")
async def async_query(ctx: Context, seconds: float) -> int:
    """One ORM query and a wait, as an async view's task would: the ORM from async code."""
    import asyncio

    from asgiref.sync import sync_to_async

    def where() -> str:
        return threading.current_thread().name

    async_gauge.db_threads.add(await sync_to_async(where)())
    count = await Execution.objects.filter(kind="nothing-here").acount()
    await asyncio.sleep(seconds)
    return count


@task(kind="tests.async_kills_its_session", max_failures=1)
async def async_kills_its_session() -> None:
    """Ends its ORM thread's database session from the server side, as a restart would,
    then fails on it: the connection left behind is dead."""
    from asgiref.sync import sync_to_async
    from django.db import connection

    def kill() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    await sync_to_async(kill)()


@task(takes_context=True, kind="tests.async_cooperative")
async def async_cooperative(ctx: Context, seconds: float) -> str:
    """Awaits in small steps; when asked to stop it pauses, keeping its progress."""
    import asyncio

    steps = ctx.carry.get("steps", 0)
    for _ in range(int(seconds / 0.05)):
        if ctx.cancelled.is_set():
            ctx.carry["steps"] = steps
            raise Pause(resume_in=timedelta(0), note="stopping early")
        await asyncio.sleep(0.05)
        steps += 1
    return "done"


@task(takes_context=True, kind="tests.async_leased", lease=timedelta(seconds=2))
async def async_leased(ctx: Context, seconds: float) -> str:
    """Awaits longer than its 2 s lease: only a renewed lease keeps it."""
    return await async_wait.func(ctx, seconds)  # type: ignore[no-any-return]


@task(takes_context=True, kind="tests.async_overrun", timeout=timedelta(seconds=0.5))
async def async_overrun(ctx: Context, seconds: float) -> str:
    """Overruns its 0.5 s timeout unless ``seconds`` is short."""
    return await async_wait.func(ctx, seconds)  # type: ignore[no-any-return]


@task(max_failures=1, kind="tests.duplicate_user")
def duplicate_user(username: str) -> None:
    """Creates a user twice: the second ``create`` fails deep in the ORM and the
    driver (an IntegrityError chained from the driver's own), as real failures do."""
    from django.contrib.auth.models import User

    User.objects.create(username=username)
    User.objects.create(username=username)


# The durable-steps tests' tasks (tests/steps) and the conformance matrix's
# (tests/conformance), registered with these.
from tests.taskapp import logging_tasks, matrix_tasks, steps_tasks, stream_tasks  # noqa: E402, F401


@task(takes_context=True, kind="tests.runaway", time_limit=2, soft_time_limit=1, max_failures=1)
def runaway(ctx: Context, marker: str) -> None:
    """An endless loop: on the process pool, its soft limit is raised in it at 1 s (it
    writes ``marker`` and loops on) and its child is killed at its 2 s hard limit."""
    _record(ctx)
    try:
        while True:
            pass
    except SoftTimeLimitExceeded:
        with open(marker, "w") as out:
            out.write(str(os.getpid()))
    while True:
        pass


@task(takes_context=True, kind="tests.long_lease_sleep", lease=timedelta(minutes=5))
def long_lease_sleep(ctx: Context, seconds: float) -> str:
    """A job with a 5-minute lease: only a recovery at once brings it back soon."""
    _record(ctx)
    time.sleep(seconds)
    return "slept"
