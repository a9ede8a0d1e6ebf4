"""django-tasks-db as its README sets it up, with the benchmark's tasks.

Before Django 6 the Tasks framework comes from the ``django-tasks`` backport, which
is then an installed app too.
"""

from __future__ import annotations

from importlib.util import find_spec

from bench.djangoproject.common import *  # noqa: F403
from bench.djangoproject.common import database

_BACKPORT = [] if find_spec("django.tasks") else ["django_tasks"]

INSTALLED_APPS = [*_BACKPORT, "django_tasks_db", "bench.tasksdbapp"]
DATABASES = {"default": database()}
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
