"""Tasks that stand for real work: a wait on I/O (sync and async) and pure-Python CPU."""

from __future__ import annotations

import asyncio
import time

from django_jobqueue import task

CHECK_EVERY = 2_000  # loop iterations between looks at the thread's CPU clock


@task
def wait(ms: int) -> None:
    """Blocks its thread ``ms`` milliseconds, as a sync HTTP call does."""
    time.sleep(ms / 1000)


@task
async def wait_async(ms: int) -> None:
    """Awaits ``ms`` milliseconds, as an async HTTP call does."""
    await asyncio.sleep(ms / 1000)


@task
def compute(ms: int) -> int:
    """Pure-Python work until this thread has used ``ms`` milliseconds of CPU: the same
    work per job however loaded the machine (a wall-clock bound would do less of it on
    a busy one), holding the GIL all along."""
    until = time.thread_time() + ms / 1000
    total = 0
    while time.thread_time() < until:
        for i in range(CHECK_EVERY):
            total += i * i % 7
    return total % 1000
