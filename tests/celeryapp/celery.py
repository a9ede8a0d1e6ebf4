"""The project's Celery app, as Celery's ``proj/celery.py`` writes it."""

from django_jobqueue.contrib.celery import Celery

app = Celery("proj")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(bind=True, ignore_result=True)
def debug_task(self):
    return f"Request: {self.request.id}"
