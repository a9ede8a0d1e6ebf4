"""Tasks of the stream tests (tests/steps/test_streams*.py, tests/browser): each writes
to its job's stream with ``ctx.stream.write``, inside durable steps and outside them."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django_jobqueue import Context, task


@task(takes_context=True, kind="tests.streams.chunks", max_failures=None)
def chunks(ctx: Context, n: int = 100, pause: float = 0.0) -> int:
    """``n`` chunks written outside any step, ``pause`` seconds apart."""
    for i in range(n):
        ctx.stream.write({"chunk": i, "text": f"chunk {i}"})
        if pause:
            time.sleep(pause)
    return n


def _write_two(ctx: Context, label: str, marker: str, hold: float) -> str:
    ctx.stream.write(f"{label}.a")
    if hold and ctx.run_count == 1:
        if marker:
            Path(marker).touch()
        time.sleep(hold)
    ctx.stream.write(f"{label}.b")
    return label


@task(
    takes_context=True,
    kind="tests.streams.stepped",
    lease=timedelta(seconds=3),
    max_failures=None,
)
def stepped(
    ctx: Context, n: int = 5, hold_in: int = -1, hold: float = 0.0, marker: str = ""
) -> list[str]:
    """ "start", then for each i a step writing "s{i}.a" and "s{i}.b" and, outside it,
    "after s{i}", then "done". In the first run, step ``hold_in`` works ``hold`` seconds
    between its two writes (touching ``marker`` first): where a test kills the worker."""
    ctx.stream.write("start")
    done = []
    for i in range(n):
        hold_here = hold if i == hold_in else 0.0
        done.append(ctx.step(f"s{i}", _write_two, ctx, f"s{i}", marker, hold_here))
        ctx.stream.write(f"after s{i}")
    ctx.stream.write("done")
    return done


def expected_stepped(n: int) -> list[str]:
    """What ``stepped(n)`` leaves in its stream: every item once, in order."""
    items = ["start"]
    for i in range(n):
        items += [f"s{i}.a", f"s{i}.b", f"after s{i}"]
    return [*items, "done"]


@task(takes_context=True, kind="tests.streams.flaky", max_failures=None)
def flaky(ctx: Context, fail_in_step: bool) -> str:
    """ "before", a step writing "in step", "between"; the first run fails (inside the
    step after its write, or after "between"), the next one ends with "end"."""
    ctx.stream.write("before")

    def body() -> str:
        ctx.stream.write("in step")
        if fail_in_step and ctx.run_count == 1:
            raise RuntimeError("the step fails once")
        return "stepped"

    ctx.step("s", body)
    ctx.stream.write("between")
    if not fail_in_step and ctx.run_count == 1:
        raise RuntimeError("the run fails once, after its writes")
    ctx.stream.write("end")
    return "ok"


@task(takes_context=True, kind="tests.streams.sleepy", max_failures=None)
def sleepy(ctx: Context) -> str:
    """Writes around a durable sleep: the replay after it writes nothing twice."""
    ctx.stream.write("one")
    ctx.step("s", lambda: ctx.stream.write("two"))
    ctx.sleep(0.01)
    ctx.stream.write("three")
    return "woke"


@task(takes_context=True, kind="tests.streams.writes", max_failures=1)
def writes(ctx: Context, values: list[Any], catch: bool = False) -> int:
    """Writes each value; with ``catch``, a refused write is caught and the run goes on."""
    written = 0
    for value in values:
        try:
            ctx.stream.write(value)
            written += 1
        except Exception:
            if not catch:
                raise
    return written


@task(takes_context=True, kind="tests.streams.unserialisable", max_failures=1)
def unserialisable(ctx: Context) -> None:
    ctx.stream.write("fine")
    ctx.stream.write({"when": object()})


@task(takes_context=True, kind="tests.streams.async_writer", max_failures=1)
async def async_writer(ctx: Context) -> None:
    ctx.stream.write("from an async task")
