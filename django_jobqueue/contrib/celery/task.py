"""Celery's ``Task``: the object ``@shared_task`` and ``@app.task`` make of a function
(or a class with ``run``), its options, and what a task does from inside a run
(``self.request``, ``self.retry()``, ``self.update_state()``).

Calling it (``delay``, ``apply_async``, ``apply``, signatures) is ``canvas`` and
``calling``; running it on a worker is ``runner``. Options are checked when the task is
defined: one that does not map is refused there, naming it and the alternative.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django_jobqueue.contrib.celery import config
from django_jobqueue.contrib.celery import request as requests
from django_jobqueue.contrib.celery.exceptions import (
    DifferentHere,
    MaxRetriesExceededError,
    Retry,
    Unsupported,
)
from django_jobqueue.errors import InvalidOption

if TYPE_CHECKING:
    from django_jobqueue.contrib.celery.canvas import Signature
    from django_jobqueue.contrib.celery.request import Request
    from django_jobqueue.contrib.celery.result import AsyncResult

# The options a task may be given, Celery's names.
OPTIONS = frozenset(
    {
        "name", "bind", "base", "queue", "priority", "max_retries", "default_retry_delay",
        "autoretry_for", "dont_autoretry_for", "retry_kwargs", "retry_backoff",
        "retry_backoff_max", "retry_jitter", "rate_limit", "time_limit", "soft_time_limit",
        "ignore_result", "acks_late", "typing", "track_started", "reject_on_worker_lost",
        "throws", "store_errors_even_if_ignored", "serializer", "shared", "lazy", "trail",
        "expires",
    }
)  # fmt: skip

# Options Celery has and this queue refuses, each with its alternative.
UNSUPPORTED = {
    "Request": "a custom Request class has no place here; read self.request in the task",
    "Strategy": "workers claim from the database; there is no consumer strategy",
    "backend": "results are kept on the job's row, there is no result backend to choose",
    "resultrepr_maxsize": "results are stored whole as JSON (MAX_RESULT_BYTES bounds them)",
    "compression": "payloads are JSON rows, not messages; there is nothing to compress",
    "send_events": "runs are journalled in the database; use Django signals or tracing",
}


class Task:
    """A Celery-style task. Class attributes are Celery's defaults."""

    name: str = ""
    max_retries: int | None = 3
    default_retry_delay: float = 180
    rate_limit: str | int | None = None
    ignore_result: bool = False
    acks_late: bool | None = None
    time_limit: float | None = None
    soft_time_limit: float | None = None
    autoretry_for: tuple[type[BaseException], ...] = ()
    dont_autoretry_for: tuple[type[BaseException], ...] = ()
    retry_kwargs: dict[str, Any] = {}
    retry_backoff: bool | float = False
    retry_backoff_max: float = 600
    retry_jitter: bool = True
    typing: bool = True
    priority: int | None = None
    queue: str | None = None
    expires: float | None = None
    serializer: str = "json"
    track_started: bool = False
    reject_on_worker_lost: bool | None = None
    throws: tuple[type[BaseException], ...] = ()
    store_errors_even_if_ignored: bool = False
    app: Any = None  # the Celery app of @app.task (None: the current one)
    # Set by ``make``: the registry entry a worker runs this task by.
    definition: Any = None

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__}.run() is not written")

    # --- Celery's hooks (called on the worker, as by Celery) ---------------------------

    def on_success(self, retval: Any, task_id: str, args: Any, kwargs: Any) -> None:
        """Called after a successful run."""

    def on_retry(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        """Called when a run ends in a retry."""

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        """Called when a run fails for good."""

    def after_return(
        self, status: str, retval: Any, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        """Called after every run, whatever its end."""

    # --- calling -----------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task here, now, as a function (``request.called_directly`` is True)."""
        with requests.pushed(
            requests.Request(args=list(args), kwargs=dict(kwargs), task=self.name)
        ):
            return self.run(*args, **kwargs)

    @property
    def request(self) -> Request:
        return requests.current()

    @property
    def owner(self) -> Any:
        """The app whose configuration applies: its own, else the current one."""
        return self.app or config.current()

    def delay(self, *args: Any, **kwargs: Any) -> Any:
        return self.apply_async(args, kwargs)

    def apply_async(
        self,
        args: Any = None,
        kwargs: dict[str, Any] | None = None,
        **options: Any,
    ) -> Any:
        """Enqueue a call (``countdown``, ``eta``, ``expires``, ``queue``, ``priority``,
        ``link``, ``headers``, ...); eager when ``task_always_eager`` is set."""
        return self.signature(args, kwargs, **options).apply_async()

    def apply(self, args: Any = None, kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
        """Run the call here and now, retries included (their delays not waited for)."""
        return self.signature(args, kwargs, **options).apply()

    def signature(self, args: Any = None, kwargs: Any = None, **options: Any) -> Signature:
        from django_jobqueue.contrib.celery.canvas import Signature

        immutable = bool(options.pop("immutable", False))
        return Signature(self, args or (), kwargs or {}, options, immutable=immutable)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> Signature:
        return self.signature(args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Signature:
        return self.signature(args, kwargs, immutable=True)

    def starmap(self, it: Any) -> Signature:
        from django_jobqueue.contrib.celery.canvas import starmap

        return starmap(self, it)

    def map(self, it: Any) -> Signature:
        from django_jobqueue.contrib.celery.canvas import xmap

        return xmap(self, it)

    def chunks(self, it: Any, n: int) -> Any:
        from django_jobqueue.contrib.celery.canvas import chunks

        return chunks(self, it, n)

    def AsyncResult(self, task_id: Any) -> AsyncResult:
        from django_jobqueue.contrib.celery.result import AsyncResult

        return AsyncResult(task_id)

    # --- inside a run ------------------------------------------------------------------

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: BaseException | None = None,
        throw: bool = True,
        eta: datetime | None = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Retry:
        """End this run with a retry after ``countdown`` seconds (or at ``eta``; else
        ``default_retry_delay``): raises ``Retry``. Past ``max_retries`` it raises
        ``exc`` if given, else ``MaxRetriesExceededError``, and the task fails."""
        if args is not None or kwargs is not None or options:
            name = "args" if args is not None else "kwargs" if kwargs is not None else min(options)
            raise Unsupported(
                f"{self.name}: retry({name}=...) is not supported: a retry runs the same "
                "call again; to run another call, apply_async() it and return",
                option=name,
            )
        request = self.request
        limit = self.max_retries if max_retries is None else max_retries
        if limit is not None and request.retries >= limit:
            if exc is not None:
                raise exc
            raise MaxRetriesExceededError(
                f"Can't retry {self.name}[{request.id}] args:{request.args} "
                f"kwargs:{request.kwargs}: it has been retried {request.retries} times "
                f"(max_retries={limit})"
            )
        if eta is not None:
            moment = eta if eta.tzinfo else eta.replace(tzinfo=UTC)
            when = max(moment - datetime.now(UTC), timedelta(0))
        else:
            when = timedelta(seconds=self.default_retry_delay if countdown is None else countdown)
        signal = Retry(exc=exc, when=when)
        if throw:
            raise signal
        return signal

    def update_state(
        self, task_id: str | None = None, state: str | None = None, meta: Any = None, **kw: Any
    ) -> None:
        """Report progress: ``meta``'s ``current`` (or ``done``) and ``total`` become the
        job's progress and ``state`` its note (``AsyncResult.state`` then shows it while
        the job runs). Outside a worker's run (a direct or eager call) it does nothing."""
        request = self.request
        if task_id is not None and task_id != request.id:
            raise Unsupported(
                f"{self.name}: update_state(task_id=...) of another task is not supported: "
                "a job reports only its own progress",
                option="task_id",
            )
        ctx = request.ctx
        if ctx is None:
            return
        values = meta if isinstance(meta, dict) else {}
        done = values.get("current", values.get("done", 0))
        total = values.get("total")
        if not isinstance(done, int | float) or isinstance(done, bool):
            done = 0
        if not isinstance(total, int | float) or isinstance(total, bool):
            total = None
        ctx.progress(done, total, note=state or "PROGRESS")

    def __repr__(self) -> str:
        return f"<@task: {self.name}>"


def make(fun: Callable[..., Any], *, app: Any, options: dict[str, Any]) -> Task:
    """The task of ``fun`` with ``options`` (checked here), registered for the workers."""
    from django_jobqueue.contrib.celery.runner import register

    check_options(fun, options)
    base = options.pop("base", None) or Task
    bind = bool(options.pop("bind", False))
    for name in ("shared", "lazy", "trail"):
        options.pop(name, None)
    if inspect.iscoroutinefunction(fun):
        raise Unsupported(
            f"{fun.__module__}.{fun.__qualname__}: Celery runs no async def task; write it "
            "with django_jobqueue's @task, which awaits it on the worker's event loop",
            option="async def",
        )
    attrs: dict[str, Any] = {
        "run": fun if bind else staticmethod(fun),
        "name": options.pop("name", None) or f"{fun.__module__}.{fun.__name__}",
        "__doc__": fun.__doc__,
        "__module__": fun.__module__,
        "__wrapped__": fun,
        "app": app,
        **options,
    }
    cls = type(fun.__name__, (base,), attrs)
    task: Task = cls()
    register(task, fun, bound=bind)
    return task


def check_options(fun: Callable[..., Any], options: dict[str, Any]) -> None:
    where = f"{fun.__module__}.{fun.__qualname__}"
    for name in sorted(options):
        if name in UNSUPPORTED:
            raise Unsupported(f"{where}: task option {name} is not supported: {UNSUPPORTED[name]}",
                              option=name)  # fmt: skip
        if name not in OPTIONS:
            raise InvalidOption(
                f"{where}: unknown task option {name!r}; Celery's options that map here: "
                + ", ".join(sorted(OPTIONS)),
                option=name,
            )
    serializer = options.get("serializer", "json")
    if serializer != "json":
        raise Unsupported(
            f"{where}: serializer={serializer!r}: payloads and results are JSON here, never "
            "pickle; pass JSON values (ids, not model instances)",
            option="serializer",
        )
    base = options.get("base")
    if base is not None and not (isinstance(base, type) and issubclass(base, Task)):
        raise InvalidOption(
            f"{where}: base={base!r} must be a subclass of "
            "django_jobqueue.contrib.celery.Task (celery.Task's stand-in)",
            option="base",
        )
    if options.get("acks_late") is False or options.get("reject_on_worker_lost") is False:
        warnings.warn(
            f"{where}: acks_late/reject_on_worker_lost=False: a job is acknowledged when its "
            "run settles, and a worker that dies mid-run gives its jobs back (at least once)",
            DifferentHere,
            stacklevel=4,
        )
