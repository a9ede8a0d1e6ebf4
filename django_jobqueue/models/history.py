"""The run history: the run tally's counts per minute, kept for HISTORY_DAYS, and the
deploy markers drawn over it (issue 34).

The history is fed by a maintenance service, never by a settlement: the sampler reads
the tally (the cumulative counters every settlement already adds to), subtracts what
it read last time (``RunHistoryCursor``) and adds the difference to the current
minute's rows (``RunMinute``). A settlement writes nothing more than it did, and the
history costs a few rows per kind and outcome per active minute.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobqueue.models.runtime import TallyCounts
from django_jobqueue.states import Outcome


class RunMinute(TallyCounts):
    """The runs of one kind that ended with one outcome within one minute (``minute``:
    its start, UTC), as the sampler saw them added to the tally."""

    minute = models.DateTimeField()
    kind = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)

    class Meta:
        verbose_name = "run history minute"
        constraints = [
            models.UniqueConstraint(
                fields=["minute", "kind", "outcome"], name="jobqueue_run_minute_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.kind} {self.outcome}: {self.runs} runs"


class RunHistoryCursor(TallyCounts):
    """The tally's totals of one kind and outcome as the sampler last read them. The row
    of kind ``""`` is the sampler's clock: ``sampled_at`` is when a sampler last ran, and
    updating it first is what lets one sampler at a time in."""

    kind = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, blank=True)
    sampled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "run history cursor"
        constraints = [
            models.UniqueConstraint(fields=["kind", "outcome"], name="jobqueue_history_cursor_key"),
        ]

    def __str__(self) -> str:
        return f"{self.kind or '(clock)'} {self.outcome}: {self.runs} runs"


class DeployMarker(models.Model):
    """A moment worth seeing on the history's charts (``jobqueue mark "deploy 1.4.2"``,
    ``django_jobqueue.mark``): what, when, and who set it."""

    label = models.CharField(max_length=200)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        verbose_name = "deploy marker"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.label}"
