"""The queue's tables: Job, JournalEntry, QueuePause, RunTally, Schedule and WorkerHeartbeat.

Statuses, outcomes and priorities are pinned by CHECK constraints; indexes follow
the access paths of ``store`` and are partial where the path only ever reads one
status (PostgreSQL and SQLite both honour the conditions; on MySQL/MariaDB, which have
no index conditions, migration 0008 builds what they guarantee another way).
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage
from django.db import connections, models
from django.db.models import Q
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from django_jobqueue.ids import uuid7
from django_jobqueue.states import ACTIVE, TERMINAL, Outcome, Priority, Status
from django_jobqueue.validation import decode

__all__ = [
    "ACTIVE",
    "TERMINAL",
    "Job",
    "JournalEntry",
    "KindLimit",
    "Outcome",
    "Priority",
    "QueuePause",
    "RateBucket",
    "RunTally",
    "Schedule",
    "Status",
    "WorkerHeartbeat",
]


# Django's warnings that a database cannot build an index condition (W037) or a
# conditional unique constraint (W036). Where the database has no partial indexes
# (MySQL/MariaDB) this app builds their equivalents itself (migration 0008), and its own
# check django_jobqueue.W010 says what differs there; the two are dropped for its models
# only, never for a project's. Asked of Django's features, as Django itself decides to
# warn (the models sit below the store's dialects, which they cannot ask).
_REPLACED = {"models.W036", "models.W037"}


def _without_replaced(messages: list[CheckMessage], databases: Any) -> list[CheckMessage]:
    names = {
        connections[alias].display_name
        for alias in databases or ()
        if not connections[alias].features.supports_partial_indexes
    }
    return [
        m for m in messages if not (m.id in _REPLACED and any(m.msg.startswith(n) for n in names))
    ]


class StoredJSONField(models.JSONField):
    """A JSONField whose stored value, if it cannot be decoded (not JSON, or nested too
    deeply: written around the queue), reads as a ``validation.Undecodable`` instead
    of raising, so no page or worker fails on one row. Migrations see a plain
    JSONField: the column is the same."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if isinstance(value, str | bytes) and not isinstance(expression, KeyTransform):
            return decode(value)
        return super().from_db_value(value, expression, connection)

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class Job(models.Model):
    """One job; the row stays after it finishes until cleanup removes it."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    kind = models.CharField(max_length=200)
    queue = models.CharField(max_length=100, default="default")
    payload = StoredJSONField(default=dict)
    priority = models.SmallIntegerField(choices=Priority.choices, default=Priority.NORMAL)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    visible_at = models.DateTimeField(default=timezone.now)
    claim_expires_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=255, blank=True, default="")
    run_count = models.PositiveIntegerField(default=0)
    failure_count = models.PositiveIntegerField(default=0)
    carry = StoredJSONField(default=dict, blank=True)
    result = StoredJSONField(null=True, blank=True)
    # NULL, not "", means "no key": NULLs never collide in the unique index.
    dedup_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    cancel_requested = models.BooleanField(default=False)
    cancel_actor = models.CharField(max_length=255, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "job"
        # The admin's operator actions; "delete" is Django's own (finished jobs only).
        permissions = [
            ("requeue_job", "Can requeue a finished job"),
            ("cancel_job", "Can cancel a pending or claimed job"),
            ("run_job_now", "Can run a scheduled job now"),
            ("cleanup_job", "Can clean up finished jobs"),
            ("pause_queue", "Can pause and resume a queue"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=Status.values), name="jobqueue_job_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(priority__in=Priority.values), name="jobqueue_job_priority_valid"
            ),
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=Q(status__in=["pending", "claimed"], idempotency_key__isnull=False),
                name="jobqueue_job_idempotency_active",
            ),
        ]
        indexes = [
            # Claim: pending rows in claim order (priority, then when they became runnable).
            models.Index(
                fields=["priority", "visible_at", "id"],
                condition=Q(status="pending"),
                name="jobqueue_job_claim",
            ),
            # Next scheduled wake-up for an idle worker.
            models.Index(
                fields=["visible_at"], condition=Q(status="pending"), name="jobqueue_job_next"
            ),
            # Merge candidate: oldest pending job of a kind and dedup key.
            models.Index(
                fields=["kind", "dedup_key", "created_at"],
                condition=Q(status="pending", dedup_key__isnull=False),
                name="jobqueue_job_dedup",
            ),
            # Expired leases to recover.
            models.Index(
                fields=["claim_expires_at"],
                condition=Q(status="claimed"),
                name="jobqueue_job_lease",
            ),
            # History and cleanup of finished jobs: by status/kind and finish time. Partial,
            # so claiming a job and settling it back to pending never touch them.
            models.Index(
                fields=["status", "kind", "finished_at"],
                condition=Q(status__in=TERMINAL),
                name="jobqueue_job_history",
            ),
            models.Index(
                fields=["finished_at"],
                condition=Q(finished_at__isnull=False),
                name="jobqueue_job_finished",
            ),
            # Keyset pagination over all jobs.
            models.Index(fields=["created_at", "id"], name="jobqueue_job_keyset"),
            # The admin: a kind's jobs newest first (search and filter by kind, and the list
            # of kinds read as a loose index scan); search by key, partial on having one.
            models.Index(fields=["kind", "created_at", "id"], name="jobqueue_job_kind"),
            models.Index(
                fields=["dedup_key"],
                condition=Q(dedup_key__isnull=False),
                name="jobqueue_job_dedup_key",
            ),
            models.Index(
                fields=["idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="jobqueue_job_idem_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"

    @classmethod
    def check(cls, **kwargs: Any) -> list[CheckMessage]:
        return _without_replaced(super().check(**kwargs), kwargs.get("databases"))


class JournalEntry(models.Model):
    """Append-only record of one execution, merge or operator action on a job."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="journal")
    kind = models.CharField(max_length=200)
    run_no = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    started_at = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField(default=timezone.now)
    duration = models.DurationField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    attachment = StoredJSONField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True, default="")
    actor = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        verbose_name = "journal entry"
        verbose_name_plural = "journal entries"
        constraints = [
            models.CheckConstraint(
                condition=Q(outcome__in=Outcome.values), name="jobqueue_journal_outcome_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["job", "id"], name="jobqueue_journal_job"),
            models.Index(fields=["kind", "recorded_at"], name="jobqueue_journal_kind_time"),
            # The dashboard's windows and the admin's date range; anything but a completion
            # by outcome (partial: the common "completed" entry never writes to it).
            models.Index(fields=["recorded_at"], name="jobqueue_journal_time"),
            models.Index(
                fields=["outcome", "recorded_at"],
                condition=~Q(outcome="completed"),
                name="jobqueue_journal_outcome",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.run_no}: {self.outcome}"

    @classmethod
    def check(cls, **kwargs: Any) -> list[CheckMessage]:
        return _without_replaced(super().check(**kwargs), kwargs.get("databases"))


class QueuePause(models.Model):
    """A paused queue: workers claim nothing from it until the row is deleted (resume)."""

    queue = models.CharField(primary_key=True, max_length=100)
    paused_at = models.DateTimeField(default=timezone.now)
    paused_by = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        verbose_name = "paused queue"

    def __str__(self) -> str:
        return self.queue


class RunTally(models.Model):
    """The runs of one kind that ended with one outcome: the metrics' counters.

    Every settlement adds its runs here in its own guarded write (the same statement or
    transaction as the job's new state and its journal entry), so the metrics view reads
    these few rows, never the journal, and a cleanup, which deletes journal entries,
    leaves them as they are. A row per kind, outcome and ``shard``: each worker thread
    adds to its own shard (``store.monitoring.shard_of``), so workers settling the same
    kind at once seldom wait on one row; a read sums the shards. ``le_*`` are the
    cumulative buckets of the run-duration histogram, one column per bound of
    ``store.monitoring.DURATION_BUCKETS`` in the same order: timed runs that took at
    most that long.
    """

    kind = models.CharField(max_length=200)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
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
