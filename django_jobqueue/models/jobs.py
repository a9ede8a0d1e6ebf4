"""The job and its journal: the rows every run reads and writes."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage
from django.db import models
from django.db.models import Q
from django.utils import timezone

from django_jobqueue.ids import uuid7
from django_jobqueue.models.fields import StoredJSONField, without_replaced
from django_jobqueue.states import TERMINAL, Outcome, Priority, Status


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
    # The job's key (a tenant, a customer): what per-key limits and fairness count by.
    # Its column is job_key: KEY is a reserved word in MySQL.
    key = models.CharField(max_length=255, null=True, blank=True, db_column="job_key")  # noqa: DJ001
    cancel_requested = models.BooleanField(default=False)
    cancel_actor = models.CharField(max_length=255, blank=True, default="")
    finished_at = models.DateTimeField(null=True, blank=True)
    # A workflow's step (NULL for a plain job): see models/workflows.py.
    workflow = models.ForeignKey(
        "django_jobqueue.Workflow",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="steps",
        db_index=False,
    )
    step_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # Database defaults: the store's raw inserts of plain jobs do not name them.
    join_when = models.CharField(max_length=16, blank=True, default="", db_default="")
    parents_open = models.PositiveIntegerField(default=0, db_default=0)
    parents_dead = models.PositiveIntegerField(default=0, db_default=0)
    # Live progress, as the running task last reported it (``ctx.progress``): written
    # with its lease renewal, never a statement of its own.
    progress_done = models.FloatField(null=True, blank=True)
    progress_total = models.FloatField(null=True, blank=True)
    progress_note = models.CharField(max_length=200, blank=True, default="", db_default="")
    # The enqueuing code's trace context (the propagator's carrier as JSON text, "" for
    # none), so a run's span joins the trace of the request that enqueued it.
    trace_context = models.CharField(max_length=2048, blank=True, default="", db_default="")
    # Durable steps (run/durable.py; the recorded steps are rows of ``StepRecord``): why a
    # pending job is not runnable yet ("sleep", "event" or "" for neither) and until
    # when; the event it waits for and, once ``emit`` released it, the event delivered.
    parked = models.CharField(max_length=8, blank=True, default="", db_default="")
    wake_at = models.DateTimeField(null=True, blank=True)
    wait_name = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    wait_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    delivered = StoredJSONField(null=True, blank=True)

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
            # Step names are unique in their workflow. Partial: a plain job (no workflow)
            # has no entry, so enqueuing, claiming and settling one never writes to it
            # (MySQL keeps the whole index of migration 0012: no conditions there).
            models.UniqueConstraint(
                fields=["workflow", "step_name"],
                condition=Q(workflow__isnull=False),
                name="jobqueue_job_step_name_unique",
            ),
            models.UniqueConstraint(
                fields=["idempotency_key"],
                condition=Q(status__in=["pending", "claimed"], idempotency_key__isnull=False),
                name="jobqueue_job_idempotency_active",
            ),
        ]
        indexes = [
            # Claim: pending rows in claim order (priority, then when they became runnable).
            # Also every other read of pending rows by visible_at (an idle worker's next
            # wake-up, the oldest due, the scheduled count), a priority at a time
            # (store.sql.PRIORITIES): no index on visible_at alone (migration 0028).
            models.Index(
                fields=["priority", "visible_at", "id"],
                condition=Q(status="pending"),
                name="jobqueue_job_claim",
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
            # A workflow's steps (its page, its cancellation, its cleanup).
            models.Index(
                fields=["workflow", "status"],
                condition=Q(workflow__isnull=False),
                name="jobqueue_job_workflow",
            ),
            # The jobs waiting for an event (``emit`` releases them by name and key).
            models.Index(
                fields=["wait_name", "wait_key"],
                condition=Q(wait_name__isnull=False),
                name="jobqueue_job_waiting_event",
            ),
            # No index of its own for the order of creation: the id is a UUIDv7 of its
            # creation (ids.py), so the primary key is that order, and a range of
            # ``created_at`` is read along it (store.reading.created_ids; migration 0029).
            # The admin: a kind's jobs newest first (search and filter by kind, and the list
            # of kinds read as a loose index scan); search by key, partial on having one.
            models.Index(fields=["kind", "id"], name="jobqueue_job_kind"),
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
            # Per-key claims (a claim with per-key rules reads only these): a kind's
            # pending jobs by key in claim order, the unkeyed ones first (key NULL), so
            # each kind's unkeyed jobs, its keys (a skip scan) and each key's jobs are a
            # probe apiece; every pending job has an entry. Then each key's pending jobs
            # in enqueue order (``ordered``), and the admin's filter by key.
            models.Index(
                fields=["kind", "key", "priority", "visible_at", "id"],
                condition=Q(status="pending"),
                name="jobqueue_job_key_claim",
            ),
            models.Index(
                fields=["kind", "key", "id"],
                condition=Q(status="pending", key__isnull=False),
                name="jobqueue_job_key_fifo",
            ),
            models.Index(
                fields=["key", "created_at"],
                condition=Q(key__isnull=False),
                name="jobqueue_job_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"

    @classmethod
    def check(cls, **kwargs: Any) -> list[CheckMessage]:
        return without_replaced(super().check(**kwargs), kwargs.get("databases"))


class JournalEntry(models.Model):
    """Append-only record of one execution, merge or operator action on a job."""

    # No database constraint: its check, deferred to the commit, was a lookup per entry
    # and a fifth of a busy worker's turn on PostgreSQL. An entry is written only for a
    # row its transaction holds (a settlement's guarded write in the same statement, an
    # operator's action on rows it locked), and every delete the store makes goes
    # through the ORM, journal first (``store.pruning``), as the edges' keys do
    # (``StepEdge``). Its own index doubled ``jobqueue_journal_job`` (job, id).
    job = models.ForeignKey(
        Job,
        on_delete=models.CASCADE,
        related_name="journal",
        db_constraint=False,
        db_index=False,
    )
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
        return without_replaced(super().check(**kwargs), kwargs.get("databases"))


class TerminateRequest(models.Model):
    """An operator's ``terminate`` of a claimed job: its worker stops the run now (its
    process-pool child killed, its coroutine cancelled, its thread abandoned) and
    settles it ``cancelled``, naming ``actor`` and how. One per job, for the run
    numbered ``run_no``; the job's ``cancel_requested`` is set with it, so a run that
    ends before its worker sees the request ends cancelled all the same."""

    # No database constraint, as the journal: deleted with its job through the ORM.
    job = models.OneToOneField(
        Job, primary_key=True, on_delete=models.CASCADE, db_constraint=False, related_name="+"
    )
    run_no = models.PositiveIntegerField()
    actor = models.CharField(max_length=255, blank=True, default="")
    requested_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "terminate request"

    def __str__(self) -> str:
        return f"terminate {self.job_id} run {self.run_no}"
