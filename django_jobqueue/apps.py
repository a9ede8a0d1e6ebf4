"""App config: imports every installed app's ``tasks.py`` so their kinds are registered."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class JobQueueConfig(AppConfig):
    name = "django_jobqueue"
    label = "django_jobqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_jobqueue import checks  # noqa: F401 - registers the system checks
        from django_jobqueue.run import children  # noqa: F401 - its notifier task, every worker's
        from django_jobqueue.task.registry import registry

        autodiscover_modules("tasks")
        registry.mark_discovered()  # what a worker sees too; W006 names any registered later
