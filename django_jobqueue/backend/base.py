"""``JobQueueBackend``: Django's Tasks framework on django_jobqueue.

``enqueue`` writes a job through the storage layer's own enqueue (in the caller's
transaction, if any); workers run it like any other job; ``get_result`` reads the
job and its journal back as a ``TaskResult``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from django.apps import apps
from django.core import checks

from django_jobqueue import store
from django_jobqueue.backend import results
from django_jobqueue.backend.compat import (
    BaseTaskBackend,
    InvalidTaskBackend,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    normalize_json,
    task_enqueued,
)
from django_jobqueue.backend.options import BackendOptions, JobQueueTask, check_retry_options, tier
from django_jobqueue.backend.runner import DjangoTaskDef
from django_jobqueue.errors import EnqueueError, InvalidArguments, JobNotFound
from django_jobqueue.operations import on_job_database
from django_jobqueue.rules.lifecycle import clamped
from django_jobqueue.task.options import (
    Options,
    build_request,
    check_json,
    encode_payload,
    unsupported,
)
from django_jobqueue.task.registry import registry
from django_jobqueue.task.registry import validate_queue as check_queue
from django_jobqueue.task.submit import submit

P = ParamSpec("P")
R = TypeVar("R")

MAX_ID_LENGTH = 64  # Django's limit on a task result id


class JobQueueBackend(BaseTaskBackend):
    """Django Tasks on django_jobqueue: durable jobs, leases, retries and the journal.

    ``TASKS = {"default": {"BACKEND": "django_jobqueue.backend.JobQueueBackend",
    "QUEUES": [...], "OPTIONS": {"MAX_ATTEMPTS": ..., "BACKOFF": ...}}}``
    """

    task_class = JobQueueTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        for queue in self.queues:
            try:
                check_queue(queue)
            except EnqueueError as exc:
                raise InvalidTaskBackend(f"TASKS[{alias!r}]['QUEUES']: {exc}") from exc
        self.retry_options = BackendOptions.parse(alias, self.options)

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks, this backend's retry options; then the task is registered as a
        kind, so a worker that imported its module can run it."""
        super().validate_task(task)
        check_retry_options(task)
        self.definition(task)

    def definition(self, task: Task[..., Any]) -> DjangoTaskDef:
        """The registry entry of ``task``'s function, registered on first sight."""
        existing = registry.find(task.module_path)
        if isinstance(existing, DjangoTaskDef) and existing.task.func is task.func:
            return existing
        defn = DjangoTaskDef(task, options=self.retry_options, sender=type(self))
        registry.register(defn)  # DuplicateKind if a task of ours has this kind
        return defn

    def enqueue(self, task: Task[P, R], args: Any, kwargs: Any) -> TaskResult[P, R]:
        self.validate_task(task)
        defn = self.definition(task)
        payload, text = self.payload_for(defn, task, list(args), dict(kwargs))
        options = Options.build(
            priority=tier(task.priority), queue=task.queue_name, run_at=_run_after(task)
        )
        request = build_request(defn, payload, options, payload_json=text)
        job = submit(request).job  # on its queue database, its receivers told
        result = results.build(job=results.JobView.of_job(job), entries=[], task=task)
        task_enqueued.send(type(self), task_result=result)
        return result

    def payload_for(
        self, defn: DjangoTaskDef, task: Task[..., Any], args: list[Any], kwargs: dict[str, Any]
    ) -> tuple[dict[str, Any], str]:
        """The job's payload (the call, and what ``TaskResult.task`` is rebuilt from) and
        its JSON; a bad argument is named, before anything is written."""
        try:
            defn.check_call(args, kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{defn.kind}{defn.signature}: {exc}", kind=defn.kind) from exc
        args = [_normalized(f"args[{index}]", value, defn.kind) for index, value in enumerate(args)]
        kwargs = {name: _normalized(name, value, defn.kind) for name, value in kwargs.items()}
        payload = {
            "args": args,
            "kwargs": kwargs,
            "priority": task.priority,
            "backend": self.alias,
            "run_after": after.isoformat() if (after := _run_after(task)) else None,
        }
        return payload, encode_payload(payload, kind=defn.kind)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        if apps.is_installed("django_jobqueue"):
            return []
        return [
            checks.Error(
                f"TASKS[{self.alias!r}] uses JobQueueBackend but django_jobqueue is not in "
                "INSTALLED_APPS: its tables would not exist and no tasks.py would be "
                "autodiscovered for the workers.",
                hint='Add "django_jobqueue" to INSTALLED_APPS and run migrate.',
                id="django_jobqueue.E101",
            )
        ]

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """The result of a job this backend enqueued; TaskResultDoesNotExist for an id
        that is malformed, unknown, or a job that is not a Django task."""
        if not isinstance(result_id, str) or not result_id or len(result_id) > MAX_ID_LENGTH:
            raise TaskResultDoesNotExist(f"{result_id!r} is not a task result id")
        with on_job_database(result_id):
            try:
                job = store.get_job(job_id=result_id)
            except JobNotFound:
                raise TaskResultDoesNotExist(result_id) from None
            entries = store.journal(job_id=job.id)
        defn = registry.find(job.kind)
        if not isinstance(defn, DjangoTaskDef):
            raise TaskResultDoesNotExist(
                f"{result_id} is a job of kind {job.kind!r}, not a Django task this process "
                "knows (is the module defining it imported?)"
            )
        return defn.result(results.JobView.of_job(job), entries)


def _normalized(name: str, value: Any, kind: str) -> Any:
    """The argument as Django's own check turns it into JSON (tuples and other sequences
    to lists, UTF-8 bytes to text), refused as Django refuses it (``TypeError``,
    "Unsupported type: …", here with the argument and the path inside it), then held to
    what the queue stores (NaN, NUL, depth)."""
    try:
        normal = normalize_json(value)
    except RecursionError:
        # Django's normalising recurses: a value nested past Python's limit is refused
        # by the queue's own depth check, which names the path (and does not recurse).
        check_json(name, value, kind=kind)
        raise
    except (TypeError, ValueError) as exc:
        raise unsupported(
            name,
            value,
            kind=kind,
            problem=str(exc),
            refused=_django_refuses,
            containers=(Mapping, Sequence),
            word=lambda part: "value" if isinstance(part, bytes) else "type",
        ) from None
    check_json(name, normal, kind=kind)
    return normal


def _django_refuses(value: Any) -> bool:
    """What ``normalize_json`` raises on by itself (its parts aside)."""
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False
    return not isinstance(value, Mapping | Sequence | str | int | float | bool | None)


def _run_after(task: Task[..., Any]) -> datetime | None:
    """The task's ``run_after`` as the job is scheduled: clamped, like every time, to
    what the database holds (``lifecycle.clamped``); a naive one is left for
    ``Options.build`` to refuse."""
    after = task.run_after
    if after is None or after.tzinfo is None:
        return after
    return clamped(after)
