"""django_jobqueue with the benchmark's tasks, JOBQUEUE left at its defaults (but for
``--run-logs off``: RUN_LOGS None)."""

from __future__ import annotations

import os
from typing import Any

from bench.djangoproject.common import *  # noqa: F403
from bench.djangoproject.common import database

INSTALLED_APPS = ["django_jobqueue", "bench.benchapp"]
DATABASES = {"default": database()}
JOBQUEUE: dict[str, Any] = {}
if os.environ.get("BENCH_RUN_LOGS") == "off":
    JOBQUEUE["RUN_LOGS"] = None
