"""The queue's tables, one module per concern: jobs and their journal; the running
state beside them (paused queues, tallies, limits, rate buckets, schedules, workers);
workflows and their edges; durable steps' records and events; job streams.

Statuses, outcomes and priorities are pinned by CHECK constraints; indexes follow
the access paths of ``store`` and are partial where the path only ever reads one
status (PostgreSQL and SQLite both honour the conditions; on MySQL/MariaDB, which have
no index conditions, migration 0008 builds what they guarantee another way).
"""

from __future__ import annotations

from django_jobqueue.models.events import Event, EventChannel
from django_jobqueue.models.fields import StoredJSONField
from django_jobqueue.models.history import DeployMarker, RunHistoryCursor, RunMinute
from django_jobqueue.models.jobs import Job, JournalEntry, TerminateRequest
from django_jobqueue.models.records import RunLog, StepRecord
from django_jobqueue.models.runtime import (
    KindLimit,
    MergeLock,
    QueuePause,
    RateBucket,
    RunTally,
    Schedule,
    WorkerHeartbeat,
)
from django_jobqueue.models.streams import StreamItem
from django_jobqueue.models.workflows import StepEdge, Workflow, WorkflowShape
from django_jobqueue.states import ACTIVE, TERMINAL, Outcome, Priority, Status, WorkflowStatus

__all__ = [
    "ACTIVE",
    "TERMINAL",
    "DeployMarker",
    "Event",
    "EventChannel",
    "Job",
    "JournalEntry",
    "KindLimit",
    "MergeLock",
    "Outcome",
    "Priority",
    "QueuePause",
    "RateBucket",
    "RunHistoryCursor",
    "RunLog",
    "RunMinute",
    "RunTally",
    "Schedule",
    "Status",
    "StepEdge",
    "StepRecord",
    "StoredJSONField",
    "StreamItem",
    "TerminateRequest",
    "WorkerHeartbeat",
    "Workflow",
    "WorkflowShape",
    "WorkflowStatus",
]
