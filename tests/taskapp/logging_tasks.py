"""Tasks of the per-run log tests (tests/db/test_run_logs.py, the browser's job page):
each logs through its module's logger and ``ctx.logger``."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import timedelta

from django_jobqueue import Context, task

logger = logging.getLogger(__name__)
# A logger no run captures by default.
OTHER = logging.getLogger("tests.elsewhere")


@task(takes_context=True, max_failures=3)
def chatty(ctx: Context, lines: int = 2, fail: bool = False, secret: str = "") -> int:
    """``lines`` INFO lines through the module's logger, a WARNING through ctx.logger,
    a DEBUG line (below the default level) and a line of another logger."""
    for n in range(lines):
        logger.info("run %s line %s of job %s", ctx.run_count, n, ctx.job_id)
    logger.debug("a debug line")
    OTHER.info("a line of another logger")
    ctx.logger.warning("warned in run %s", ctx.run_count)
    if secret:
        logger.info("calling the API with token=%s", secret)
    if fail:
        raise RuntimeError(f"chatty failed in run {ctx.run_count}")
    return lines


@task(takes_context=True)
def interleaved(ctx: Context, tag: str, barrier_key: str) -> None:
    """Logs its tag, waits for its sibling runs on other slot threads to log theirs,
    then logs again: each run must keep only its own lines."""
    logger.info("first %s", tag)
    BARRIERS[barrier_key].wait(timeout=60)
    logger.info("second %s", tag)


@task(takes_context=True)
async def async_interleaved(ctx: Context, tag: str) -> None:
    """As ``interleaved``, on the event loop: yields between its two lines."""
    logger.info("first %s", tag)
    await asyncio.sleep(0.2)
    await asyncio.to_thread(logger.info, "from a thread %s", tag)
    logger.info("second %s", tag)


@task(takes_context=True, timeout=timedelta(seconds=1), max_failures=1)
def overruns(ctx: Context) -> None:
    """Logs, then waits past its timeout (until the worker gives up and cancels it)."""
    logger.info("before the wait")
    ctx.cancelled.wait(60)
    logger.info("after the worker gave up")


@task(takes_context=True, timeout=timedelta(seconds=1), max_failures=2)
def overruns_then_fails(ctx: Context) -> None:
    """Waits past its timeout until the worker gives up on it, then fails: a failure the
    worker drops (it settled the run when it gave up). Each run's thread is kept in
    ``RAN_ON`` under its job's id, for a test to wait until the dropped run has ended."""
    RAN_ON.setdefault(str(ctx.job_id), []).append(threading.current_thread())
    ctx.cancelled.wait(60)
    raise RuntimeError(f"overruns_then_fails failed after run {ctx.run_count} was given up")


# The threads ``overruns_then_fails`` ran on, by job id.
RAN_ON: dict[str, list[threading.Thread]] = {}


@task(takes_context=True)
def logs_then_waits(ctx: Context, key: str) -> None:
    """Logs, says so (``LOGGED[key]``), then holds on past the worker's shutdown timeout
    (until the test lets it go: ``HOLD[key]``), so that the worker releases it."""
    logger.info("logged before the release")
    LOGGED[key].set()
    HOLD[key].wait(60)


# Set by ``logs_then_waits`` once it logged, and by the test to let it end, by a key the
# test picks.
LOGGED: dict[str, threading.Event] = {}
HOLD: dict[str, threading.Event] = {}

# Barriers the interleaved runs of one test meet at, by a key the test picks.
BARRIERS: dict[str, threading.Barrier] = {}
