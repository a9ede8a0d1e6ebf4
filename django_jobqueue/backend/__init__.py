"""django_jobqueue as a backend for Django's Tasks framework (``django.tasks``).

``TASKS = {"default": {"BACKEND": "django_jobqueue.backend.JobQueueBackend"}}``: see
docs/howto/django-tasks.md. Needs Django 6.0+, or Django 5.2 with the ``django-tasks``
backport (``pip install "django-jobqueue[tasks-backport]"``).
"""

from __future__ import annotations

from django_jobqueue.backend.base import JobQueueBackend
from django_jobqueue.backend.options import JobQueueTask, tier
from django_jobqueue.backend.results import LeaseExpired

__all__ = ["JobQueueBackend", "JobQueueTask", "LeaseExpired", "tier"]
