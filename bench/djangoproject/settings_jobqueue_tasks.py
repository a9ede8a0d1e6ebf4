"""django_jobqueue as the Django Tasks backend, with the benchmark's django.tasks tasks.

Before Django 6 the Tasks framework comes from the ``django-tasks`` backport, which
is then an installed app too.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from bench.djangoproject.common import *  # noqa: F403
from bench.djangoproject.common import database

_BACKPORT = [] if find_spec("django.tasks") else ["django_tasks"]

INSTALLED_APPS = [*_BACKPORT, "django_jobqueue", "bench.djtasksapp"]
DATABASES = {"default": database()}
JOBQUEUE: dict[str, Any] = {}
TASKS = {"default": {"BACKEND": "django_jobqueue.backend.JobQueueBackend", "QUEUES": ["default"]}}
