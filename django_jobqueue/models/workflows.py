"""Workflows: a set of jobs (its steps) joined by edges, parent before child.

A step is an ordinary ``Job`` with ``workflow`` set; it starts ``waiting`` while
``parents_open`` (parents not yet finished as its ``join_when`` needs) is above zero.
The settlement that finishes a parent updates its children's counters and the
workflow's in the same guarded transaction, so a join costs a constant amount of work
per edge and fires once. The edges are kept for the graph, the cancellation of
dependents and the re-arming on requeue, never scanned to decide a join.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from django_jobqueue.ids import uuid7
from django_jobqueue.states import WorkflowStatus


class WorkflowShape(models.TextChoices):
    """How the workflow was written: the admin labels it and a batch stays open."""

    WORKFLOW = "workflow", "workflow"
    CHAIN = "chain", "chain"
    GROUP = "group", "group"
    CHORD = "chord", "chord"
    BATCH = "batch", "batch"


class Workflow(models.Model):
    """One enqueued workflow; its status follows from its steps.

    ``steps_open`` counts steps not yet terminal and ``steps_dead`` the dead ones; the
    settlement that makes a step terminal updates them, and the one that closes the last
    open step sets ``status`` and ``finished_at``.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=200)
    shape = models.CharField(
        max_length=16, choices=WorkflowShape.choices, default=WorkflowShape.WORKFLOW
    )
    status = models.CharField(
        max_length=16, choices=WorkflowStatus.choices, default=WorkflowStatus.RUNNING
    )
    steps_total = models.PositiveIntegerField(default=0)
    steps_open = models.PositiveIntegerField(default=0)
    steps_dead = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    cancel_actor = models.CharField(max_length=255, blank=True, default="")
    # The name of the step whose result is the workflow's (``WorkflowHandle.result``);
    # "" for none (a group's result is its members' results, in order).
    output = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        verbose_name = "workflow"
        permissions = [("cancel_workflow", "Can cancel a workflow")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=WorkflowStatus.values),
                name="jobqueue_workflow_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(shape__in=WorkflowShape.values),
                name="jobqueue_workflow_shape_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "created_at"], name="jobqueue_workflow_status"),
            models.Index(fields=["created_at", "id"], name="jobqueue_workflow_keyset"),
            models.Index(
                fields=["finished_at"],
                condition=Q(finished_at__isnull=False),
                name="jobqueue_workflow_finished",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.id} ({self.status})"


class StepEdge(models.Model):
    """Parent before child, within one workflow.

    Its three keys have no database constraint (``db_constraint=False``): checking them
    was most of a large chord's write (three keys an edge, each checked at commit).
    The edges of a workflow are written only in the transaction that writes its steps
    (``store.workflows``), and each of those steps' own key to the workflow is checked,
    so an edge never names a step or workflow that is not there; the ORM's deletes (of a
    step, of a workflow: every delete the store makes) still cascade to the edges. The
    parent's and the child's own indexes were doubles of the two below, written for
    nothing with every edge."""

    workflow = models.ForeignKey(
        Workflow, on_delete=models.CASCADE, related_name="edges", db_constraint=False
    )
    parent = models.ForeignKey(
        "django_jobqueue.Job",
        on_delete=models.CASCADE,
        related_name="child_edges",
        db_constraint=False,
        db_index=False,  # jobqueue_edge_unique (parent, child) serves it
    )
    child = models.ForeignKey(
        "django_jobqueue.Job",
        on_delete=models.CASCADE,
        related_name="parent_edges",
        db_constraint=False,
        db_index=False,  # jobqueue_edge_child serves it
    )

    class Meta:
        verbose_name = "workflow edge"
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="jobqueue_edge_unique"),
        ]
        indexes = [models.Index(fields=["child"], name="jobqueue_edge_child")]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id}"
