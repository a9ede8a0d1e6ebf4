"""Django ``@task`` functions (Django's Tasks framework) that the backend tests enqueue.

The same functions run on Django's ImmediateBackend (``.using(backend="immediate")``)
and on JobQueueBackend (the default backend of the test settings).
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import Any

from django_jobqueue.backend.compat import TaskContext, TaskResult, task

# What backoff() was shown, per call: (exception type, status, errors, attempts).
BACKOFF_CALLS: list[tuple[str, str, int, int]] = []


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@task
async def async_add(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task(takes_context=True)
def attempt_info(context: TaskContext, label: str) -> dict[str, Any]:
    result = context.task_result
    return {
        "label": label,
        "attempt": context.attempt,
        "status": str(result.status),
        "started": result.started_at is not None,
        "args": result.args,
    }


@task
def fail(message: str) -> None:
    raise ValueError(message)


@task
def unserialisable() -> Any:
    return object()


@task(queue_name="mail")
def send_mail(to: str) -> str:
    return f"sent to {to}"


@task(takes_context=True, max_attempts=3)
def flaky(context: TaskContext, failures: int) -> dict[str, int]:
    """Fails its first ``failures`` attempts, then returns the attempt that succeeded."""
    if context.attempt <= failures:
        raise RuntimeError(f"planned failure on attempt {context.attempt}")
    return {"attempt": context.attempt}


def _record_backoff(exc: BaseException, result: TaskResult) -> None:
    BACKOFF_CALLS.append(
        (type(exc).__name__, str(result.status), len(result.errors), result.attempts)
    )


def an_hour(exc: BaseException, result: TaskResult) -> float:
    _record_backoff(exc, result)
    return 3600.0


def give_up(exc: BaseException, result: TaskResult) -> None:
    _record_backoff(exc, result)
    return None


# The steps ``diverging`` records in order: a test changes it between runs, as a deploy
# would (tests/steps/test_django_tasks.py).
DIVERGING_PLAN = ["a", "b"]


@task(takes_context=True, max_attempts=5, backoff=an_hour)
def diverging(context: Any) -> list[str]:
    """Steps in the order ``DIVERGING_PLAN`` says, then an hour's sleep; a backoff that
    would retry any failure in an hour (a divergence is not retried)."""
    done = [context.step(name, str, name) for name in DIVERGING_PLAN]
    context.sleep(3600)
    return done


@task(max_attempts=5, backoff=an_hour)
def retry_in_an_hour() -> None:
    raise ConnectionError("upstream is down")


@task(max_attempts=5, backoff=give_up)
def no_retry_wanted() -> None:
    raise PermissionError("retrying will not help")


@task(takes_context=True, lease=timedelta(seconds=2), max_attempts=3)
def slow_first_attempt(context: TaskContext, seconds: float) -> dict[str, Any]:
    """Sleeps on its first attempt (long enough for a test to kill its worker)."""
    if context.attempt == 1:
        time.sleep(seconds)
    return {"attempt": context.attempt, "pid": os.getpid()}


@task(takes_context=True, timeout=timedelta(seconds=1), max_attempts=2)
def overruns(context: TaskContext, seconds: float) -> dict[str, int]:
    """Sleeps past its 1 s timeout on its first attempt only."""
    if context.attempt == 1:
        time.sleep(seconds)
    return {"attempt": context.attempt}


# --- issue 17, package "admin": secrets passed positionally (redacted by parameter name) ---


@task
def log_in(user: str, password: str, *api_keys: str) -> str:
    return f"logged in {user} with {len(api_keys)} keys"


@task(takes_context=True)
def onboard_steps(context: Any, user: str) -> dict[str, Any]:
    """Durable steps through the backend's context (tests/steps/test_django_tasks.py)."""
    greeted = context.step("greet", str.upper, user)
    context.sleep(3600)
    answer = context.wait_for("answered", key=user, timeout=7200)
    return {"greeted": greeted, "answer": answer}


@task(takes_context=True)
def streams_and_patches(context: Any, user: str) -> dict[str, Any]:
    """The rest of the context's durable surface through the backend (a patch, a
    stream write inside a step; tests/steps/test_django_tasks.py)."""
    new_way = context.patched("shout")

    def greet() -> str:
        context.stream.write({"greeting": user})
        return user.upper() if new_way else user

    return {"greeted": context.step("greet", greet), "patched": new_way}


@task(takes_context=True)
async def async_onboard(context: Any, user: str) -> dict[str, Any]:
    """An ``async def`` Django task's durable twins through the backend's context."""
    greeted = await context.astep("greet", str.upper, user)
    await context.asleep(3600)
    answer = await context.await_event("answered", key=user, timeout=7200)
    return {"greeted": greeted, "answer": answer}
