"""Django's Tasks framework, wherever it comes from: core ``django.tasks`` on Django 6.0
and later, the ``django-tasks`` backport (``django_tasks``) on Django 5.2.

The rest of the backend imports these names from here and nowhere else. The two
differ only in where things live and in two exception names (the backport's
``InvalidTaskError``/``InvalidTaskBackendError`` are core's ``InvalidTask``/
``InvalidTaskBackend``); both are aliased to core's names. The type checker always
sees core's API (django-stubs ships it), whichever one is installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

__all__ = [
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "source",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]

if TYPE_CHECKING:
    from django.tasks import (
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    source = "django.tasks"
else:
    try:
        from django.tasks import (
            Task,
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
    except ImportError:
        try:
            from django_tasks import task, task_backends
        except ImportError as exc:
            raise ImproperlyConfigured(
                "django_jobqueue.backend needs Django's Tasks framework: Django 6.0 or later, "
                'or on Django 5.2 the backport: pip install "django-jobqueue[tasks-backport]"'
            ) from exc
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import (
            TASK_MAX_PRIORITY,
            TASK_MIN_PRIORITY,
            Task,
            TaskContext,
            TaskError,
            TaskResult,
            TaskResultStatus,
        )
        from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
        from django_tasks.utils import normalize_json

        source = "django_tasks"
    else:
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
        from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        source = "django.tasks"
