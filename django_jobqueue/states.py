"""The lifecycle vocabulary: job statuses, journal outcomes and priorities.

Kept apart from the models so that task code can use them before Django loads apps.
"""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    # A workflow step whose parents have not all finished: never claimed, not backlog.
    WAITING = "waiting", "waiting"
    PENDING = "pending", "pending"
    CLAIMED = "claimed", "claimed"
    COMPLETED = "completed", "completed"
    DEAD = "dead", "dead"
    CANCELLED = "cancelled", "cancelled"


TERMINAL = (Status.COMPLETED, Status.DEAD, Status.CANCELLED)
ACTIVE = (Status.PENDING, Status.CLAIMED)
# Not yet finished, a waiting workflow step included (what an operator may not delete).
UNFINISHED = (Status.WAITING, Status.PENDING, Status.CLAIMED)


class Outcome(models.TextChoices):
    COMPLETED = "completed", "completed"
    PAUSED = "paused", "paused"
    RETRIED = "retried", "retried"
    DEAD = "dead", "dead"
    STALE_RECOVERED = "stale-recovered", "stale-recovered"
    RELEASED = "released", "released"
    MERGED = "merged", "merged"
    CANCELLED = "cancelled", "cancelled"
    REQUEUED = "requeued", "requeued"
    RUN_NOW = "run-now", "run now"


class WorkflowStatus(models.TextChoices):
    """A workflow's status follows from its steps' (see ARCHITECTURE.md, Joins)."""

    RUNNING = "running", "running"
    COMPLETED = "completed", "completed"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class JoinWhen(models.TextChoices):
    """When a step's parents release it: all completed (a dead parent cancels it), all
    finished in any terminal state, or all finished with at least one dead (a batch's
    ``on_failure``; cancelled when none died)."""

    COMPLETED = "completed", "completed"
    FINISHED = "finished", "finished"
    FAILED = "failed", "failed"


class Priority(models.IntegerChoices):
    HIGH = 0, "high"
    NORMAL = 1, "normal"
    LOW = 2, "low"
