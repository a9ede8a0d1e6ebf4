"""Tasks of the durable-steps tests (tests/steps): each step's side effect is an
``Effect`` row naming the step, so a test counts how often each step's work ran."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.db import transaction

from django_jobqueue import Context, Permanent, task
from tests.taskapp.models import Effect, Execution


def effect(ctx: Context, step: str) -> str:
    """A step's side effect: one row naming the job, the run and the step."""
    Effect.objects.create(job_id=ctx.job_id, run_no=ctx.run_count, worker=step)
    return step


def _started(ctx: Context) -> None:
    with transaction.atomic():
        Execution.objects.create(
            job_id=ctx.job_id, kind=ctx.kind, run_no=ctx.run_count, pid=0, thread=""
        )


@task(takes_context=True, kind="tests.steps.three", lease=timedelta(seconds=3), max_failures=None)
def three(ctx: Context, hold: float = 0.0, hold_after: int = 2) -> list[str]:
    """Three steps; in the first run, ``hold`` seconds of work after step ``hold_after``
    (where a test kills the worker). The task's own code records each run's start."""
    _started(ctx)
    done = []
    for i in (1, 2, 3):
        done.append(ctx.step(f"s{i}", effect, ctx, f"s{i}"))
        if i == hold_after and hold and ctx.run_count == 1:
            time.sleep(hold)
    return done


@task(
    takes_context=True,
    kind="tests.steps.atomic_three",
    lease=timedelta(seconds=3),
    max_failures=None,
    atomic=True,
)
def atomic_three(ctx: Context, hold: float = 0.0, marker: str = "") -> list[str]:
    """``three`` as an atomic task: each step's effect commits with its record. In the
    first run, after step 2, touches the file ``marker`` (the run's own transaction
    hides its rows from the test) and works ``hold`` seconds."""
    done = []
    for i in (1, 2, 3):
        done.append(ctx.step(f"s{i}", effect, ctx, f"s{i}"))
        if i == 2 and hold and ctx.run_count == 1:
            if marker:
                Path(marker).touch()
            time.sleep(hold)
    return done


@task(takes_context=True, kind="tests.steps.sleeper", max_failures=None)
def sleeper(ctx: Context, seconds: float, atomic_steps: bool = False) -> str:
    """A step, a sleep, another step."""
    _started(ctx)
    ctx.step("before", effect, ctx, "before")
    ctx.sleep(seconds)
    if atomic_steps:
        with transaction.atomic():
            ctx.step("after", effect, ctx, "after")
    else:
        ctx.step("after", effect, ctx, "after")
    return "woke"


@task(takes_context=True, kind="tests.steps.atomic_sleeper", max_failures=None, atomic=True)
def atomic_sleeper(ctx: Context, seconds: float) -> str:
    """``sleeper`` as an atomic task: the steps before the sleep commit with its parking."""
    ctx.step("before", effect, ctx, "before")
    ctx.sleep(seconds)
    ctx.step("after", effect, ctx, "after")
    return "woke"


@task(takes_context=True, kind="tests.steps.waiter", max_failures=None)
def waiter(ctx: Context, name: str, key: str, timeout: float | None = None) -> Any:
    """Waits for an event, then records what it got in a step."""
    _started(ctx)
    got = ctx.wait_for(name, key=key, timeout=timeout)
    ctx.step("got", effect, ctx, "got")
    return got


@task(takes_context=True, kind="tests.steps.twice", max_failures=None)
def twice(ctx: Context, name: str, key: str) -> list[Any]:
    """Two waits for the same name and key in one job: two events, one each."""
    return [ctx.wait_for(name, key=key), ctx.wait_for(name, key=key)]


@task(takes_context=True, kind="tests.steps.plain", max_failures=1)
def plain(ctx: Context, how: str, value: str = "") -> Any:
    """Misuses of the steps API, each raising its error out of the task."""
    if how == "reuse":
        ctx.step("a", int, 1)
        ctx.step("a", int, 2)
    elif how == "nested":
        ctx.step("outer", lambda: ctx.step("inner", int, 1))
    elif how == "unstorable":
        ctx.step("bad", object)
    elif how == "negative":
        ctx.sleep(-1)
    elif how == "bad-name":
        ctx.step(value or "", int)
    elif how == "not-callable":
        ctx.step("x", 42)  # type: ignore[arg-type]
    elif how == "naive":
        from datetime import datetime

        ctx.sleep_until(datetime(2030, 1, 1))
    elif how == "timeout":
        ctx.wait_for("e", key="k", timeout=float(value))
    elif how == "step-then-sleep":
        ctx.step("before", int, 1)
        ctx.sleep(60)
    return how


@task(takes_context=True, kind="tests.steps.many", max_failures=1)
def many(ctx: Context, count: int, size: int = 0) -> int:
    """``count`` memoized steps, each returning ``size`` characters of text."""
    for i in range(count):
        ctx.step(f"s{i}", str, "x" * size)
    return count


@task(kind="tests.steps.ten", takes_context=True)
def ten(ctx: Context) -> int:
    """The benchmark's 10-step job: ten memoized steps of no work."""
    return sum(ctx.step(f"step {i}", int, i) for i in range(10))


@task(
    takes_context=True,
    kind="tests.steps.chaos",
    lease=timedelta(seconds=3),
    max_failures=None,
)
def chaos(ctx: Context, seconds: float, nap: float) -> int:
    """The chaos campaign's job: five steps of ``seconds`` of work each, their effects
    rows written with their records (a transaction around each step), a sleep of
    ``nap`` seconds between the second and the third. Its stream: "before c{i}"
    written outside each step, "c{i}" inside it, and "end" (``CHAOS_STREAM``)."""
    for i in range(1, 6):
        ctx.stream.write(f"before c{i}")
        with transaction.atomic():
            ctx.step(f"c{i}", _work, ctx, f"c{i}", seconds)
        if i == 2:
            ctx.sleep(nap)
    ctx.stream.write("end")
    return 5


CHAOS_STREAM = [*(w for i in range(1, 6) for w in (f"before c{i}", f"c{i}")), "end"]


def _work(ctx: Context, step: str, seconds: float) -> str:
    ctx.stream.write(step)
    effect(ctx, step)
    time.sleep(seconds)
    return step


@task(takes_context=True, kind="tests.steps.sleep_in_atomic", max_failures=1)
def sleep_in_atomic(ctx: Context) -> None:
    """Sleeps inside a transaction of its own: the block rolls the parking back."""
    with transaction.atomic():
        effect(ctx, "inside")
        ctx.sleep(3600)


@task(
    takes_context=True,
    kind="tests.steps.three_in_transactions",
    lease=timedelta(seconds=3),
    max_failures=None,
)
def three_in_transactions(ctx: Context, hold: float = 0.0) -> list[str]:
    """``three`` with each step in a transaction of the task's own (its effect commits
    with its record); in the first run, ``hold`` seconds of work after step 2."""
    done = []
    for i in (1, 2, 3):
        with transaction.atomic():
            done.append(ctx.step(f"s{i}", effect, ctx, f"s{i}"))
        if i == 2 and hold and ctx.run_count == 1:
            time.sleep(hold)
    return done


@task(takes_context=True, kind="tests.steps.waits", max_failures=1)
def waits(ctx: Context, count: int) -> int:
    """``count`` waits that time out at once: each parks the job and is passed by the
    next run, which replays every record before it."""
    for i in range(count):
        ctx.wait_for("tests.steps.never", key=str(i), timeout=0)
    return count


# The tickets whose bug in ``fixable``'s "check" step is fixed (a test's "deploy").
FIXED_CHECKS: set[str] = set()


def _check(ticket: str) -> str:
    return "fixed" if ticket in FIXED_CHECKS else "buggy"


@task(takes_context=True, kind="tests.steps.fixable", max_failures=1)
def fixable(ctx: Context, ticket: str) -> str:
    """Records a "check" step that says "buggy" until the ticket is fixed, and dies of
    it: a requeue replays the recorded "buggy"; a re-run from "check" runs the fix."""
    fetched = ctx.step("fetch", str, ticket)
    verdict = ctx.step("check", _check, ticket)
    if verdict == "buggy":
        raise Permanent(f"step check recorded {verdict!r} for {fetched}")
    return f"{fetched} {verdict}"


# --- async def tasks: ctx.astep, ctx.asleep, ctx.await_event ------------------------


async def aeffect(ctx: Context, step: str) -> str:
    """``effect`` awaited: an async step's side effect."""
    await Effect.objects.acreate(job_id=ctx.job_id, run_no=ctx.run_count, worker=step)
    return step


@task(takes_context=True, kind="tests.steps.athree", lease=timedelta(seconds=3), max_failures=None)
async def athree(ctx: Context, hold: float = 0.0) -> list[str]:
    """``three`` as an ``async def`` task: three ``astep``s, and in the first run
    ``hold`` seconds of awaiting after the second (where a test kills the worker)."""
    await Execution.objects.acreate(
        job_id=ctx.job_id, kind=ctx.kind, run_no=ctx.run_count, pid=0, thread=""
    )
    done = []
    for i in (1, 2, 3):
        done.append(await ctx.astep(f"s{i}", aeffect, ctx, f"s{i}"))
        if i == 2 and hold and ctx.run_count == 1:
            await asyncio.sleep(hold)
    return done


@task(takes_context=True, kind="tests.steps.asleeper", max_failures=None)
async def asleeper(ctx: Context, seconds: float) -> str:
    """``sleeper`` as an async task: a step, a sleep, another step."""
    await ctx.astep("before", aeffect, ctx, "before")
    await ctx.asleep(seconds)
    await ctx.astep("after", aeffect, ctx, "after")
    return "woke"


@task(takes_context=True, kind="tests.steps.awaiter", max_failures=None)
async def awaiter(ctx: Context, name: str, key: str, timeout: float | None = None) -> Any:
    """``waiter`` as an async task: awaits an event, then records a step."""
    got = await ctx.await_event(name, key=key, timeout=timeout)
    await ctx.astep("got", aeffect, ctx, "got")
    return got


def _effect_then_unstorable(ctx: Context) -> object:
    """A plain step function whose result cannot be stored, after a write."""
    effect(ctx, "bad")
    return object()


@task(takes_context=True, kind="tests.steps.aplain", max_failures=1)
async def aplain(ctx: Context, how: str) -> Any:
    """Misuses of the async steps API, each raising its error out of the task."""
    if how == "sync-step":
        ctx.step("a", int, 1)
    elif how == "sync-sleep":
        ctx.sleep(60)
    elif how == "nested":

        async def outer() -> int:
            return int(await ctx.astep("inner", int, 1))

        await ctx.astep("outer", outer)
    elif how == "awaitable":
        await ctx.astep("lam", lambda: asyncio.sleep(0))
    elif how == "rolled-back":
        await ctx.astep("bad", _effect_then_unstorable, ctx)
    elif how == "gather":
        await asyncio.gather(
            ctx.astep("a", asyncio.sleep, 0.2, "a"), ctx.astep("b", asyncio.sleep, 0.2, "b")
        )
    elif how == "reuse":
        await ctx.astep("a", int, 1)
        await ctx.astep("a", int, 2)
    elif how == "unstorable":
        await ctx.astep("bad", object)
    elif how == "versioned":
        return await ctx.astep("v", int, 3, version=2) + int(await ctx.apatched("change"))
    return how


# --- child workflows awaited from a durable step -------------------------------------


@task(kind="tests.steps.member")
def member(i: int) -> int:
    """A chord's member: its number."""
    return i


@task(kind="tests.steps.total", takes_context=True)
def total(ctx: Context) -> int:
    """A chord's callback: the sum of its members' results."""
    return sum(ctx.parents.values())


@task(kind="tests.steps.boom", max_failures=1)
def boom(why: str) -> None:
    """A child that dies."""
    raise ValueError(why)


def _child(n: int, fail: str, shape: str = "chord") -> Any:
    from django_jobqueue import Workflow, chord, group

    if fail:
        return boom.s(fail)
    if n == 0:
        return member.s(7)
    if shape == "group":
        return group([member.s(i) for i in range(n)])
    if shape == "sinks":  # a workflow of n final steps and no output step
        flow = Workflow("sinks")
        for i in range(n):
            flow.add(member.s(i), name=f"m{i}")
        return flow
    return chord([member.s(i) for i in range(n)], total.s())


@task(takes_context=True, kind="tests.steps.parent", max_failures=1)
def parent(ctx: Context, n: int = 0, fail: str = "", shape: str = "chord") -> Any:
    """Awaits a child (a chord of ``n`` members, or a group, or a workflow of ``n``
    final steps by ``shape``; a job when ``n`` is 0, a dying job with ``fail``),
    records a step after it, returns its result or its ChildFailed's facts."""
    from django_jobqueue import ChildFailed

    _started(ctx)
    try:
        got = ctx.step_workflow("child", _child(n, fail, shape))
    except ChildFailed as exc:
        got = {"failed": exc.step, "status": exc.status, "error": exc.error}
    ctx.step("after", effect, ctx, "after")
    return got


@task(takes_context=True, kind="tests.steps.aparent", max_failures=1)
async def aparent(ctx: Context, n: int) -> Any:
    """``parent`` as an async task (no failure case)."""
    got = await ctx.astep_workflow("child", _child(n, ""))
    await ctx.astep("after", aeffect, ctx, "after")
    return got


@task(takes_context=True, kind="tests.steps.deep", max_failures=1)
def deep(ctx: Context, level: int) -> int:
    """Starts a child of itself, one level deeper, without end: MAX_CHILD_DEPTH stops it."""
    return int(ctx.step_workflow("down", deep.s(level + 1)))


# --- the async and child-workflow chaos campaign (tests/steps/async_campaign.py) ------


def _aworked(job_id: str, run_no: int, step: str, seconds: float) -> str:
    """A campaign step's side effect, then its work (a plain function: run by ``astep``
    in a transaction with its record, or by an atomic task in its run's)."""
    Effect.objects.create(job_id=job_id, run_no=run_no, worker=step)
    time.sleep(seconds)
    return step


@task(kind="tests.steps.kid", atomic=True, lease=timedelta(seconds=3), max_failures=None)
def kid(parent: str, i: int, seconds: float) -> int:
    """A member of a campaign job's child chord: its effect, counted on the parent."""
    _aworked(parent, 0, f"kid{i}", seconds)
    return i


@task(
    kind="tests.steps.kids_total",
    takes_context=True,
    atomic=True,
    lease=timedelta(seconds=3),
    max_failures=None,
)
def kids_total(ctx: Context, parent: str, seconds: float) -> int:
    """The child chord's callback: its effect, and the sum of the members."""
    _aworked(parent, 0, "total", seconds)
    return sum(ctx.parents.values())


@task(
    takes_context=True,
    kind="tests.steps.achaos",
    lease=timedelta(seconds=3),
    max_failures=None,
)
async def achaos(ctx: Context, seconds: float, members: int, nap: float) -> int:
    """The async campaign's job: an ``astep``, a child chord awaited, an ``astep``, a
    sleep, an ``astep``; each step's effect written with its record."""
    from django_jobqueue import chord

    job = str(ctx.job_id)
    await ctx.astep("a1", _aworked, job, ctx.run_count, "a1", seconds)
    header = [kid.s(job, i, seconds) for i in range(members)]
    got = await ctx.astep_workflow("kids", chord(header, kids_total.s(job, seconds)))
    await ctx.astep("a2", _aworked, job, ctx.run_count, "a2", seconds)
    await ctx.asleep(nap)
    await ctx.astep("a3", _aworked, job, ctx.run_count, "a3", seconds)
    return int(got)  # the chord's result: its callback's
