from django.db import models


class Execution(models.Model):
    """One start of a test task, written by the task itself: proves how often a job ran."""

    job_id = models.UUIDField()
    kind = models.CharField(max_length=200)
    run_no = models.PositiveIntegerField()
    pid = models.PositiveIntegerField()
    thread = models.CharField(max_length=100, default="")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True)


class Effect(models.Model):
    """A row an atomic test task writes in its run's transaction. No unique constraint: only
    that transaction can keep a job's effect to one row however often it runs."""

    job_id = models.UUIDField(db_index=True)
    run_no = models.PositiveIntegerField()
    worker = models.CharField(max_length=200, default="")
