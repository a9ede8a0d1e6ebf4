"""Celery's demoapp/tasks.py: the same tasks, the same options; only the import of
``shared_task`` changed. Below them, tasks the tests add (progress, retries counted)."""

from django_jobqueue.contrib.celery import shared_task
from tests.celeryapp.models import Widget


@shared_task
def add(x, y):
    return x + y


@shared_task
def mul(x, y):
    return x * y


@shared_task
def xsum(numbers):
    return sum(numbers)


@shared_task
def count_widgets():
    return Widget.objects.count()


@shared_task
def rename_widget(widget_id, name):
    w = Widget.objects.get(id=widget_id)
    w.name = name
    w.save()


@shared_task(
    bind=True,
    autoretry_for=(Exception,),
    retry_kwargs={"max_retries": 2, "countdown": 10 * 60},
)
def error_task(self):
    raise Exception("Test error")


@shared_task(
    bind=True,
    autoretry_for=(Exception,),
    retry_backoff=5,
    retry_jitter=False,
    retry_kwargs={"max_retries": 3},
)
def error_backoff_test(self):
    raise Exception("Test error")


# --- the tests' own --------------------------------------------------------------------


@shared_task(bind=True, max_retries=2, default_retry_delay=0)
def flaky(self, widget_id):
    """Fails (retrying at once) until it has been retried twice, then renames."""
    if self.request.retries < 2:
        raise self.retry(exc=ValueError(f"try {self.request.retries}"))
    Widget.objects.filter(id=widget_id).update(name=f"done after {self.request.retries}")
    return self.request.retries


@shared_task(bind=True, autoretry_for=(KeyError,), retry_backoff=False,
             retry_kwargs={"max_retries": 1, "countdown": 0})  # fmt: skip
def always_key_error(self):
    raise KeyError("missing")


@shared_task
def boom():
    raise ValueError("no retry for this")


@shared_task(bind=True)
def report_progress(self, total):
    """Reports half of ``total`` done; returns the progress its run now holds."""
    self.update_state(state="PROGRESS", meta={"current": total // 2, "total": total})
    reported = self.request.ctx.reported
    return [reported.done, reported.total, reported.note]
