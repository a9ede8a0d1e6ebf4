"""enqueue(): a task instance, a @task function or a kind by name, submitted (many at
once: ``enqueue_many`` beside the class tasks, ``fn.enqueue_many`` on a function task)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django_jobqueue.errors import InvalidArguments, UnknownKind
from django_jobqueue.task.classes import ClassTask, Task
from django_jobqueue.task.functions import FunctionTask
from django_jobqueue.task.registry import registry

if TYPE_CHECKING:
    from django_jobqueue.task.handle import JobHandle


def enqueue(task_or_kind: Task | FunctionTask | str, *args: Any, **kwargs: Any) -> JobHandle:
    """Enqueue a ``Task`` instance, a ``@task`` function with arguments, or a kind by name."""
    if isinstance(task_or_kind, Task):
        if args or kwargs:
            raise InvalidArguments(
                "enqueue(task_instance) takes no further arguments; set them on the instance",
                kind=task_or_kind.kind,
            )
        return task_or_kind.enqueue()
    if isinstance(task_or_kind, FunctionTask):
        return task_or_kind.enqueue(*args, **kwargs)
    if isinstance(task_or_kind, str):
        defn = registry.get(task_or_kind)
        if isinstance(defn, FunctionTask):
            return defn.enqueue(*args, **kwargs)
        if not isinstance(defn, ClassTask):
            # A Django Tasks task (the backend registers its kinds too): its arguments and
            # results follow Django's rules, so it is enqueued through Django's API.
            raise UnknownKind(
                f"{defn.kind!r} is not a django_jobqueue task but {defn!r}: enqueue it with "
                "its own .enqueue() (django.tasks), not django_jobqueue.enqueue()",
                kind=defn.kind,
            )
        try:
            instance = defn.cls(*args, **kwargs)
        except TypeError as exc:
            raise InvalidArguments(f"{defn.kind}: {exc}", kind=defn.kind) from exc
        return instance.enqueue()
    raise InvalidArguments(
        f"enqueue() takes a Task instance, a @task function or a kind name, not "
        f"{type(task_or_kind).__name__}"
    )
