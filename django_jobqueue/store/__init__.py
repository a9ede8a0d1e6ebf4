"""The storage layer: every read and write the queue makes, one module per concern.

The only package that queries Job/JournalEntry/WorkerHeartbeat for queue mechanics:
the worker, the admin, the commands and the public API all come through here. It
imports nothing above it (no task, handle, executor or worker): what it needs from
them, a merge decision or a failure policy, it is handed as a value or a callable.
Functions take keyword-only arguments and keep each transaction short; every state
change writes its journal entry in the same transaction.
"""

from __future__ import annotations

from django_jobqueue.store.browse import COUNT_CAP, Count, count, distinct_values, planned_rows
from django_jobqueue.store.bulk import enqueue_many, enqueue_stream, streamable
from django_jobqueue.store.claim import (
    Claimed,
    ClaimRequest,
    PreparedClaim,
    claim_jobs,
    claim_ready,
    claim_statement,
    ready_claim,
)
from django_jobqueue.store.claim import prepare as prepare_claim
from django_jobqueue.store.dialects.base.spec import KeyRule
from django_jobqueue.store.durable import prune_events
from django_jobqueue.store.durable import records as step_records
from django_jobqueue.store.exchanging import exchange
from django_jobqueue.store.history import (
    History,
    Slot,
    add_marker,
    bucket_percentile,
    prune_history,
    read_history,
    sample_history,
)
from django_jobqueue.store.inserting import (
    Disposition,
    EnqueueRequest,
    MergePlan,
    NewJob,
    WrittenJob,
    active_by_key,
    enqueue,
    merge_candidates,
)
from django_jobqueue.store.keys import KeyLoad, busiest_keys, key_loads
from django_jobqueue.store.limits import (
    LIMITS_CHANGED,
    PER_KEY,
    Override,
    clear_limit,
    in_flight,
    set_limit,
    take_tokens,
)
from django_jobqueue.store.limits import overrides as limit_overrides
from django_jobqueue.store.locating import database_of_job, database_of_workflow, on_database
from django_jobqueue.store.monitoring import (
    DURATION_BUCKETS,
    RunTotal,
    freshest_heartbeat,
    oldest_due,
    run_totals,
)
from django_jobqueue.store.operations import (
    acts_on,
    cancel,
    cancel_many,
    cancel_refusal,
    delete_refusal,
    requeue,
    requeue_many,
    requeue_refusal,
    retry_dead_steps,
    run_now,
    run_now_many,
    run_now_refusal,
)
from django_jobqueue.store.partitions import (
    analyze_journal,
    drop_older,
    journal_layout,
    make_ahead,
    partition_journal,
    unpartition_journal,
)
from django_jobqueue.store.pruning import cleanup, delete_finished, prune_merge_locks
from django_jobqueue.store.queues import pause_queue, paused_queues, resume_queue
from django_jobqueue.store.reading import (
    Page,
    as_uuid,
    created_ids,
    get_job,
    history,
    history_count,
    journal,
)
from django_jobqueue.store.rerunning import divergent, rerun_from, rerun_refusal
from django_jobqueue.store.runlogs import RunLines
from django_jobqueue.store.runlogs import of as run_logs
from django_jobqueue.store.schedules import (
    ScheduleState,
    TickResult,
    last_jobs,
    record_tick,
    schedule_states,
    tick_key,
)
from django_jobqueue.store.settling import (
    apply,
    cancel_requested,
    extend_leases,
    next_wakeup,
    recover_expired,
    recover_lost,
    settle,
    write_progress,
)
from django_jobqueue.store.statistics import WORKER_GONE_AFTER, gauges, run_stats, stats, throughput
from django_jobqueue.store.steering import cancel_workflow
from django_jobqueue.store.stranded import (
    pending_kinds_except,
    queues_in_use,
    served,
    unserved_kinds,
)
from django_jobqueue.store.tables import (
    DEAD_MIN_ROWS,
    TableHealth,
    describe,
    gather_statistics,
    queue_tables,
    table_health,
    upkeep_due,
    vacuum_jobs,
)
from django_jobqueue.store.terminating import (
    terminate,
    terminate_many,
    terminate_refusal,
    terminate_requested,
)
from django_jobqueue.store.workers import WORKER_PRUNE_AFTER, beat, mark_gone, register_worker

__all__ = [
    "COUNT_CAP",
    "DEAD_MIN_ROWS",
    "DURATION_BUCKETS",
    "LIMITS_CHANGED",
    "PER_KEY",
    "WORKER_GONE_AFTER",
    "WORKER_PRUNE_AFTER",
    "ClaimRequest",
    "Claimed",
    "Count",
    "Disposition",
    "EnqueueRequest",
    "History",
    "KeyLoad",
    "KeyRule",
    "MergePlan",
    "NewJob",
    "Override",
    "Page",
    "PreparedClaim",
    "RunLines",
    "RunTotal",
    "ScheduleState",
    "Slot",
    "TableHealth",
    "TickResult",
    "WrittenJob",
    "active_by_key",
    "acts_on",
    "add_marker",
    "analyze_journal",
    "apply",
    "as_uuid",
    "beat",
    "bucket_percentile",
    "busiest_keys",
    "cancel",
    "cancel_many",
    "cancel_refusal",
    "cancel_requested",
    "cancel_workflow",
    "claim_jobs",
    "claim_ready",
    "claim_statement",
    "cleanup",
    "clear_limit",
    "count",
    "created_ids",
    "database_of_job",
    "database_of_workflow",
    "delete_finished",
    "delete_refusal",
    "describe",
    "distinct_values",
    "divergent",
    "drop_older",
    "enqueue",
    "enqueue_many",
    "enqueue_stream",
    "exchange",
    "extend_leases",
    "freshest_heartbeat",
    "gather_statistics",
    "gauges",
    "get_job",
    "history",
    "history_count",
    "in_flight",
    "journal",
    "journal_layout",
    "key_loads",
    "last_jobs",
    "limit_overrides",
    "make_ahead",
    "mark_gone",
    "merge_candidates",
    "next_wakeup",
    "oldest_due",
    "on_database",
    "partition_journal",
    "pause_queue",
    "paused_queues",
    "pending_kinds_except",
    "planned_rows",
    "prepare_claim",
    "prune_events",
    "prune_history",
    "prune_merge_locks",
    "queue_tables",
    "queues_in_use",
    "read_history",
    "ready_claim",
    "record_tick",
    "recover_expired",
    "recover_lost",
    "register_worker",
    "requeue",
    "requeue_many",
    "requeue_refusal",
    "rerun_from",
    "rerun_refusal",
    "resume_queue",
    "retry_dead_steps",
    "run_logs",
    "run_now",
    "run_now_many",
    "run_now_refusal",
    "run_stats",
    "run_totals",
    "sample_history",
    "schedule_states",
    "served",
    "set_limit",
    "settle",
    "stats",
    "step_records",
    "streamable",
    "table_health",
    "take_tokens",
    "terminate",
    "terminate_many",
    "terminate_refusal",
    "terminate_requested",
    "throughput",
    "tick_key",
    "unpartition_journal",
    "unserved_kinds",
    "upkeep_due",
    "vacuum_jobs",
    "write_progress",
]
