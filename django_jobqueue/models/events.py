"""Events for durable waits: what ``emit`` sent, kept for a retention window, and the
one row per name and key that an emit and a wait lock to meet without a race."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from django_jobqueue.models.fields import StoredJSONField

# The column limits ``emit`` and ``ctx.wait_for`` check, named in their errors.
EVENT_NAME_MAX = 200
EVENT_KEY_MAX = 255


class Event(models.Model):
    """One emitted event: delivered to the jobs waiting for it when emitted, and to a
    job that starts waiting later, until the retention service prunes it."""

    name = models.CharField(max_length=EVENT_NAME_MAX)
    key = models.CharField(max_length=EVENT_KEY_MAX, blank=True, default="")
    payload = StoredJSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "event"
        indexes = [
            models.Index(fields=["name", "key", "created_at"], name="jobqueue_event_lookup"),
            models.Index(fields=["created_at"], name="jobqueue_event_created"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.key!r}"


class EventChannel(models.Model):
    """A name and key that an emit and a wait both lock (FOR UPDATE) first: whichever
    comes second sees what the first committed, so an event is never missed."""

    name = models.CharField(max_length=EVENT_NAME_MAX)
    key = models.CharField(max_length=EVENT_KEY_MAX, blank=True, default="")

    class Meta:
        verbose_name = "event channel"
        constraints = [
            models.UniqueConstraint(fields=["name", "key"], name="jobqueue_event_channel_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.key!r}"
