"""The queue's running state beside the jobs: paused queues, run tallies, limits, rate
buckets, periodic schedules and worker heartbeats."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from django_jobqueue.models.fields import StoredJSONField
from django_jobqueue.states import Outcome


class QueuePause(models.Model):
    """A paused queue: workers claim nothing from it until the row is deleted (resume)."""

    queue = models.CharField(primary_key=True, max_length=100)
    paused_at = models.DateTimeField(default=timezone.now)
    paused_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        verbose_name = "paused queue"

    def __str__(self) -> str:
        return self.queue


class TallyCounts(models.Model):
    """The tally's counters, one definition for the three tables that hold them (the
    tally, its per-minute history and the history's cursor): runs, timed runs, their
    summed microseconds, and the cumulative duration buckets, one column per bound of
    ``store.monitoring.DURATION_BUCKETS`` in the same order (timed runs that took at
    most that long)."""

    runs = models.PositiveBigIntegerField(default=0)
    timed = models.PositiveBigIntegerField(default=0)  # runs with a recorded duration
    microseconds = models.PositiveBigIntegerField(default=0)  # their durations, summed
    le_5ms = models.PositiveBigIntegerField(default=0)
    le_10ms = models.PositiveBigIntegerField(default=0)
    le_25ms = models.PositiveBigIntegerField(default=0)
    le_50ms = models.PositiveBigIntegerField(default=0)
    le_100ms = models.PositiveBigIntegerField(default=0)
    le_250ms = models.PositiveBigIntegerField(default=0)
    le_500ms = models.PositiveBigIntegerField(default=0)
    le_1s = models.PositiveBigIntegerField(default=0)
    le_2_5s = models.PositiveBigIntegerField(default=0)
    le_5s = models.PositiveBigIntegerField(default=0)
    le_10s = models.PositiveBigIntegerField(default=0)
    le_30s = models.PositiveBigIntegerField(default=0)
    le_1m = models.PositiveBigIntegerField(default=0)
    le_5m = models.PositiveBigIntegerField(default=0)
    le_15m = models.PositiveBigIntegerField(default=0)
    le_1h = models.PositiveBigIntegerField(default=0)

    class Meta:
        abstract = True


class RunTally(TallyCounts):
    """The runs of one kind that ended with one outcome: the metrics' counters.

    Every settlement adds its runs here in its own guarded write (the same statement or
    transaction as the job's new state and its journal entry), so the metrics view reads
    these few rows, never the journal, and a cleanup, which deletes journal entries,
    leaves them as they are. A row per kind, outcome and ``shard``: each worker thread
    adds to its own shard (``store.monitoring.shard_of``), so workers settling the same
    kind at once seldom wait on one row; a read sums the shards. Its counters (the
    run-duration histogram's cumulative buckets among them) are ``TallyCounts``'.
    """

    kind = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    shard = models.PositiveSmallIntegerField(default=0)

    class Meta:
        verbose_name = "run tally"
        constraints = [
            # The key of the tally's upsert (INSERT ... ON CONFLICT (kind, outcome, shard)).
            models.UniqueConstraint(
                fields=["kind", "outcome", "shard"], name="jobqueue_run_tally_shard_key"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.outcome} (shard {self.shard}): {self.runs} runs"


class KindLimit(models.Model):
    """A kind's limits as set at run time (``set_limit``, ``manage.py jobqueue limit``):
    they win over ``JOBQUEUE["LIMITS"]`` and the task's options.

    Each limit is set here or not: ``sets_max_in_flight`` False leaves ``max_in_flight``
    to the settings and the task; True with ``max_in_flight`` NULL lifts the limit.
    Likewise ``rate_limit``, where "" is no limit.
    """

    kind = models.CharField(primary_key=True, max_length=200)
    sets_max_in_flight = models.BooleanField(default=False)
    max_in_flight = models.PositiveIntegerField(null=True, blank=True)
    sets_rate_limit = models.BooleanField(default=False)
    rate_limit = models.CharField(max_length=32, blank=True, default="")
    # The per-key limits set here: a name present sets it ("max_in_flight_per_key",
    # "rate_limit_per_key", "ordered", "fair"), its value None lifting it.
    per_key = StoredJSONField(default=dict, blank=True)
    changed_at = models.DateTimeField(default=timezone.now)
    changed_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        verbose_name = "kind limit"
        constraints = [
            models.CheckConstraint(
                condition=Q(max_in_flight__isnull=True) | Q(max_in_flight__gte=1),
                name="jobqueue_kindlimit_max_in_flight_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.kind


class RateBucket(models.Model):
    """The token bucket of a rate-limited kind, shared by every process that enqueues.

    ``tokens`` as of ``refilled_at`` (seconds since the epoch, by the database's clock on
    PostgreSQL); an enqueue takes its tokens in the statement that refills the bucket.
    """

    kind = models.CharField(primary_key=True, max_length=200)
    tokens = models.FloatField()
    refilled_at = models.FloatField()

    class Meta:
        verbose_name = "rate bucket"

    def __str__(self) -> str:
        return f"{self.kind}: {self.tokens:.1f} tokens"


class MergeLock(models.Model):
    """A row per kind and dedup key that an enqueue with a merge locks first, in its own
    transaction: two enqueues of one key take turns, so the second sees the job the
    first inserted and merges into it instead of inserting a duplicate.

    ``name`` is a digest of the kind and key (any length of either fits).
    """

    name = models.CharField(primary_key=True, max_length=64)

    class Meta:
        verbose_name = "merge lock"

    def __str__(self) -> str:
        return self.name


class Schedule(models.Model):
    """The durable state of one periodic schedule: the last tick a job was enqueued for.

    Workers advance ``last_tick`` with a compare-and-set in the transaction that enqueues
    the tick's job, so each tick is enqueued once however many workers run the schedule.
    The definition itself (kind, cron, arguments) lives in code and settings.
    """

    name = models.CharField(primary_key=True, max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    last_tick = models.DateTimeField(null=True, blank=True)
    last_job_id = models.UUIDField(null=True, blank=True)
    ticked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "schedule"

    def __str__(self) -> str:
        return self.name


class WorkerHeartbeat(models.Model):
    """A running (or gone) worker process, refreshed on every heartbeat."""

    id = models.CharField(primary_key=True, max_length=255)
    host = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)
    kinds = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    jobs_done = models.PositiveBigIntegerField(default=0)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "worker"

    def __str__(self) -> str:
        return self.id
