"""Celery's ``examples/django`` demo app, written again from its behaviour, with only
its imports pointing at ``django_jobqueue.contrib.celery`` (the acceptance fixture of
the Celery-compatible surface)."""

from tests.celeryapp.celery import app as celery_app

__all__ = ["celery_app"]
