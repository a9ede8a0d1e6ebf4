"""Job streams: the items a running job writes with ``ctx.stream.write`` for readers to
follow (``JobHandle.stream``, the server-sent events view), one row per item.

Each item has its offset in the job's stream (1, 2, …, without gaps, in the order they
were written), given under the job row's guard by the write that stores it, so a run
that lost its claim stores nothing. An item written inside a durable step is stored by
the step's own record write (``step`` names it), so a replay, which returns the record,
never writes it again; an item written outside any step keeps its position among the
run's writes outside steps (``write_no``), which is unique per job: a later run of the
job that writes again at a position already stored is given that item, not a second one.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobqueue.models.fields import StoredJSONField
from django_jobqueue.models.jobs import Job


class StreamItem(models.Model):
    """One item of a job's stream, read in ``offset`` order."""

    # No database constraint, as ``StepRecord``: an item is written only by a guarded
    # write that holds the job's row in the same transaction, and every delete the store
    # makes goes through the ORM, which cascades to these rows.
    job = models.ForeignKey(
        Job,
        on_delete=models.CASCADE,
        related_name="stream_items",
        db_constraint=False,
        db_index=False,
    )
    # OFFSET is an SQL keyword: the column has another name.
    offset = models.PositiveIntegerField(db_column="item_offset")
    value = StoredJSONField()
    # The item's JSON as written, in bytes: what MAX_STREAM_BYTES sums.
    size = models.PositiveIntegerField()
    run = models.PositiveIntegerField()
    # The durable step it was written in ("" outside any step).
    step = models.CharField(max_length=200, blank=True, default="")
    # Outside any step: the write's position among its run's writes outside steps (0, 1,
    # …), which a later run's replay meets again; NULL inside a step.
    write_no = models.PositiveIntegerField(null=True, blank=True)
    written_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "stream item"
        constraints = [
            models.UniqueConstraint(fields=["job", "offset"], name="jobqueue_stream_offset"),
            models.UniqueConstraint(fields=["job", "write_no"], name="jobqueue_stream_write"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} #{self.offset}"
