"""Running a Celery-style task: its registry entry (``CeleryTaskDef``), the payload it
reads (``{"args": [...], "kwargs": {...}}``, and for a workflow step ``"celery"``: the
parents whose results come first), and one attempt with Celery's retry rules.

An exception Celery would not retry (no ``self.retry()``, not in ``autoretry_for``)
fails the task at once, as in Celery; a retry is the queue's retry at Celery's delay
(``RetryAfter``), so the journal, the admin and ``jobqueue why`` show it as one.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django_jobqueue.contrib.celery import request as requests
from django_jobqueue.contrib.celery.exceptions import Ignore, Reject, Retry, Unsupported
from django_jobqueue.errors import InvalidArguments, StepError
from django_jobqueue.rules.control import Parked, Permanent, RetryAfter, TaskSignal
from django_jobqueue.states import Priority
from django_jobqueue.task.registry import PayloadMismatch, TaskDef, registry

if TYPE_CHECKING:
    from django_jobqueue.rules.lifecycle import Policy
    from django_jobqueue.run.context import Context


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended: ``success`` (``value``), ``retry`` (after ``delay``) or
    ``failure``; ``exc`` the exception of a retry or a failure."""

    end: str
    value: Any = None
    delay: timedelta | None = None
    exc: BaseException | None = None


def _seconds(value: Any, *, kind: str, option: str) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise Unsupported(f"{kind}: {option} must be a positive number of seconds, got {value!r}",
                          option=option)  # fmt: skip
    return timedelta(seconds=value)


def rate(value: Any, *, kind: str) -> str | None:
    """Celery's ``rate_limit`` ("10/m", or a number per second) as ours ("10/m"): ours
    holds across all workers, Celery's each worker on its own."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value}/s"
    if isinstance(value, str) and value.strip().isdigit():
        return f"{value.strip()}/s"
    if isinstance(value, str):
        return value.strip()
    raise Unsupported(f"{kind}: rate_limit={value!r}: give '10/s', '10/m', '10/h' or a whole "
                      "number per second", option="rate_limit")  # fmt: skip


class CeleryTaskDef(TaskDef):
    """The registry entry of a Celery-style task: its kind is the task's name."""

    def __init__(self, task: Any, fun: Callable[..., Any], *, bound: bool) -> None:
        kind = task.name
        self.task = task
        self.written_as = fun
        self.bound = bound
        self._set_options(
            kind=kind,
            origin=f"celery:{fun.__module__}.{fun.__qualname__}",
            queue=task.queue or "default",
            priority=Priority.NORMAL,
            # Celery's rules decide (max_retries, of the task, its retry_kwargs or the
            # retry() call): no backstop of ours that could cut them short.
            max_failures=None,
            lease=None,
            backoff=None,
            timeout=None,
            rate_limit=rate(task.rate_limit, kind=kind),
        )
        # Celery's limits are ours: the hard one kills the run's child on the process
        # pool (and is settled at once elsewhere), the soft one raises inside it first.
        self._set_time_limits(task.time_limit, task.soft_time_limit)
        params = list(inspect.signature(fun).parameters.values())
        self.signature = inspect.Signature(params[1:] if bound else params)

    def __repr__(self) -> str:
        return f"<celery task {self.kind}>"

    def policy(self) -> Policy:
        """Ours, with the app's ``task_time_limit`` and ``task_soft_time_limit`` when
        the task sets neither limit (read at each run: the app's configuration may come
        after the task is defined)."""
        policy = super().policy()
        if self.time_limit is not None or self.soft_time_limit is not None:
            return policy
        conf = self.task.owner.conf
        hard = _seconds(conf["task_time_limit"], kind=self.kind, option="task_time_limit")
        soft = _seconds(conf["task_soft_time_limit"], kind=self.kind, option="task_soft_time_limit")
        if hard is None and soft is None:
            return policy
        from dataclasses import replace

        return replace(policy, time_limit=hard, soft_time_limit=soft)

    def check(self, args: list[Any], kwargs: dict[str, Any], *, parent: bool = False) -> None:
        """``InvalidArguments`` unless the call fits the task (with a parent's result to
        come first when ``parent``); skipped when the task says ``typing=False``."""
        if not self.task.typing:
            return
        given = [None, *args] if parent else args
        try:
            self.signature.bind(*given, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{self.kind}{self.signature}: {exc}", kind=self.kind) from exc

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The payload of a call (a periodic schedule's, or an enqueue's)."""
        self.check(list(args), dict(kwargs))
        return {"args": list(args), "kwargs": dict(kwargs)}

    def call(self, payload: dict[str, Any], ctx: Context) -> Any:
        args, kwargs, meta = _unpack(self.kind, payload)
        parents = meta.get("parents")
        if parents:
            results = [ctx.parents.get(name) for name in parents]
            args = [results if meta.get("as_list") else results[0], *args]
        expires = meta.get("expires")
        if expires and datetime.fromisoformat(expires) < datetime.now(UTC):
            raise Permanent(f"expired at {expires} before it ran (Celery's expires: revoked)")
        claimed = ctx.claimed
        request = requests.Request(
            id=str(ctx.job_id),
            retries=ctx.failure_count,
            args=args,
            kwargs=kwargs,
            called_directly=False,
            delivery_info={
                "routing_key": getattr(claimed, "queue", None),
                "priority": getattr(claimed, "priority", None),
                "redelivered": ctx.run_count > 1,
            },
            headers=meta.get("headers") or {},
            expires=expires,
            task=self.kind,
            ctx=ctx,
        )
        outcome = attempt(self.task, request)
        if outcome.end == "success":
            return outcome.value
        assert outcome.exc is not None
        raise RetryAfter(outcome.delay) from outcome.exc


def _unpack(kind: str, payload: dict[str, Any]) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    args, kwargs = payload.get("args"), payload.get("kwargs")
    meta = payload.get("celery") or {}
    if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(meta, dict):
        raise PayloadMismatch(f"payload {sorted(payload)} is no Celery-style call of {kind}")
    return args, kwargs, meta


def attempt(task: Any, request: requests.Request) -> Outcome:
    """Run the task once with ``request``, its hooks called as Celery calls them; the
    outcome says what Celery would do next. Our own control signals pass through."""
    args, kwargs = request.args, request.kwargs
    with requests.pushed(request):
        try:
            value = task.run(*args, **kwargs)
        except (TaskSignal, StepError, Parked):
            raise
        except Retry as signal:
            exc = signal.exc or signal
            task.on_retry(exc, str(request.id), args, kwargs, None)
            task.after_return("RETRY", signal, str(request.id), args, kwargs, None)
            return Outcome("retry", delay=signal.delay, exc=exc)
        except Ignore:
            return Outcome("success", value=None)
        except Exception as exc:
            outcome = _autoretry(task, exc) if not isinstance(exc, Reject) else None
            if outcome is None:
                task.on_failure(exc, str(request.id), args, kwargs, None)
                task.after_return("FAILURE", exc, str(request.id), args, kwargs, None)
                return Outcome("failure", exc=exc)
            if outcome.end == "retry":
                task.on_retry(exc, str(request.id), args, kwargs, None)
            else:
                task.on_failure(outcome.exc or exc, str(request.id), args, kwargs, None)
            return outcome
        task.on_success(value, str(request.id), args, kwargs)
        task.after_return("SUCCESS", value, str(request.id), args, kwargs, None)
        return Outcome("success", value=value)


def _autoretry(task: Any, exc: Exception) -> Outcome | None:
    """Celery's ``autoretry_for``: None when ``exc`` is not retried automatically."""
    if not task.autoretry_for or not isinstance(exc, task.autoretry_for):
        return None
    if task.dont_autoretry_for and isinstance(exc, task.dont_autoretry_for):
        return None
    options = dict(task.retry_kwargs)
    if task.retry_backoff:
        options["countdown"] = backoff(
            factor=int(task.retry_backoff),
            retries=task.request.retries,
            maximum=task.retry_backoff_max,
            jitter=task.retry_jitter,
        )
    try:
        task.retry(exc=exc, **options)
    except Retry as signal:
        return Outcome("retry", delay=signal.delay, exc=exc)
    except Exception as final:
        return Outcome("failure", exc=final)
    return None  # pragma: no cover - retry() always raises with throw=True


def backoff(*, factor: int, retries: int, maximum: float | None, jitter: bool) -> float:
    """Celery's exponential backoff: ``factor × 2^retries`` seconds, at most ``maximum``,
    drawn from ``[0, that]`` when ``jitter`` is on (its "full jitter")."""
    countdown = factor * (2**retries)
    if maximum is not None:
        countdown = min(maximum, countdown)
    if jitter:
        countdown = random.randrange(int(countdown) + 1)
    return float(max(0, countdown))


def register(task: Any, fun: Callable[..., Any], *, bound: bool) -> CeleryTaskDef:
    defn = CeleryTaskDef(task, fun, bound=bound)
    registry.register(defn)
    task.definition = defn
    return defn
