"""django_jobqueue with the benchmark's tasks, JOBQUEUE left at its defaults."""

from __future__ import annotations

from typing import Any

from bench.djangoproject.common import *  # noqa: F403
from bench.djangoproject.common import database

INSTALLED_APPS = ["django_jobqueue", "bench.benchapp"]
DATABASES = {"default": database()}
JOBQUEUE: dict[str, Any] = {}
