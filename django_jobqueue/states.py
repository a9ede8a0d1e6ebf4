"""The lifecycle vocabulary: job statuses, journal outcomes and priorities.

Kept apart from the models so that task code can use them before Django loads apps.
"""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    PENDING = "pending", "pending"
    CLAIMED = "claimed", "claimed"
    COMPLETED = "completed", "completed"
    DEAD = "dead", "dead"
    CANCELLED = "cancelled", "cancelled"


TERMINAL = (Status.COMPLETED, Status.DEAD, Status.CANCELLED)
ACTIVE = (Status.PENDING, Status.CLAIMED)


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


class Priority(models.IntegerChoices):
    HIGH = 0, "high"
    NORMAL = 1, "normal"
    LOW = 2, "low"
