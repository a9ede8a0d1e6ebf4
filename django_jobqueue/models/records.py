"""Durable steps' records: one row per recorded step, sleep or wait of a job.

A row of its own, appended by the guarded write of the run that recorded it, so that
recording a step costs the same at the thousandth step as at the first; kept in the
job's row as one list, every step rewrote all the ones before it (issue 30: 1,000 steps
6 s, 3,000 steps 88 s).
"""

from __future__ import annotations

from django.db import models

from django_jobqueue.models.fields import StoredJSONField
from django_jobqueue.models.jobs import Job


class StepRecord(models.Model):
    """One recorded step of a job, oldest first by ``id``: the record as
    ``run.durable`` writes it (``kind``, ``name``, its result or payload, when and in
    which run)."""

    # No database constraint, as the journal (``JournalEntry``): a record is written
    # only by a guarded write that holds the job's row in the same transaction, and
    # every delete the store makes goes through the ORM, which cascades to these rows.
    job = models.ForeignKey(
        Job,
        on_delete=models.CASCADE,
        related_name="step_records",
        db_constraint=False,
        db_index=False,
    )
    record = StoredJSONField()
    # The record's JSON as written, in bytes: what MAX_STEPS_BYTES sums, read with the
    # records instead of encoding each of them again at every run's first step.
    size = models.PositiveIntegerField()

    class Meta:
        verbose_name = "step record"
        indexes = [models.Index(fields=["job", "id"], name="jobqueue_step_record_job")]

    def __str__(self) -> str:
        record = self.record if isinstance(self.record, dict) else {}
        return f"{record.get('kind', '?')} {record.get('name', '?')!r}"


class RunLog(models.Model):
    """The log lines one run of a job captured (``run.logs``), written with the run's
    settlement, in its transaction, only when the guard let it through; the logs of a
    job's runs before its last ``RUN_LOGS_RUNS`` are deleted by the same write."""

    # No database constraint, as StepRecord: written only under the job's guarded
    # settlement, deleted with the job by the ORM's cascade.
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, related_name="run_logs", db_constraint=False, db_index=False
    )
    run_no = models.PositiveIntegerField()
    # [{"at", "level", "logger", "message"}, ...], oldest first.
    lines = StoredJSONField()
    # Lines logged between the kept head and tail (RUN_LOGS_MAX_LINES), counted only.
    dropped = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = "run log"
        indexes = [models.Index(fields=["job", "run_no"], name="jobqueue_run_log_job")]

    def __str__(self) -> str:
        return f"run {self.run_no} of {self.job_id}"
