"""The storage layer: every read and write the queue makes, one module per concern.

The only package that queries Job/JournalEntry/WorkerHeartbeat for queue mechanics:
the worker, the admin, the commands and the public API all come through here. It
imports nothing above it (no task, handle, executor or worker): what it needs from
them, a merge decision or a failure policy, it is handed as a value or a callable.
Functions take keyword-only arguments and keep each transaction short; every state
change writes its journal entry in the same transaction.
"""

from __future__ import annotations

from .claim import Claimed, claim_jobs, claim_statement
from .cleanup import cleanup
from .enqueue import (
    Disposition,
    EnqueueRequest,
    MergePlan,
    NewJob,
    active_by_key,
    enqueue,
    enqueue_many,
    merge_candidates,
)
from .history import Page, as_uuid, get_job, history, journal
from .operations import cancel, requeue
from .settle import (
    apply,
    cancel_requested,
    extend_leases,
    next_wakeup,
    recover_expired,
    settle,
)
from .stats import WORKER_GONE_AFTER, run_stats, stats
from .turn import exchange
from .workers import beat, register_worker

__all__ = [
    "WORKER_GONE_AFTER",
    "Claimed",
    "Disposition",
    "EnqueueRequest",
    "MergePlan",
    "NewJob",
    "Page",
    "active_by_key",
    "apply",
    "as_uuid",
    "beat",
    "cancel",
    "cancel_requested",
    "claim_jobs",
    "claim_statement",
    "cleanup",
    "enqueue",
    "enqueue_many",
    "exchange",
    "extend_leases",
    "get_job",
    "history",
    "journal",
    "merge_candidates",
    "next_wakeup",
    "recover_expired",
    "register_worker",
    "requeue",
    "run_stats",
    "settle",
    "stats",
]
