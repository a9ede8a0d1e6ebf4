"""django_jobqueue with the workload measures' tasks too (bench/workloads.py), JOBQUEUE
left at its defaults; the same schema as settings_jobqueue (workapp has no models)."""

from __future__ import annotations

from bench.djangoproject.settings_jobqueue import *  # noqa: F403
from bench.djangoproject.settings_jobqueue import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench.workapp"]
