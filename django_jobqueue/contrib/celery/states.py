"""Celery's task state names, and which of ours each one reads from a job.

``from celery import states`` becomes ``from django_jobqueue.contrib.celery import
states``; the names and their sets are Celery's.
"""

from __future__ import annotations

from django_jobqueue.states import Status

PENDING = "PENDING"
RECEIVED = "RECEIVED"
STARTED = "STARTED"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"
REJECTED = "REJECTED"
RETRY = "RETRY"
IGNORED = "IGNORED"

READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
UNREADY_STATES = frozenset({PENDING, RECEIVED, STARTED, REJECTED, RETRY})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES = frozenset({FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, RECEIVED, STARTED, SUCCESS, FAILURE, RETRY, REVOKED})


def of_job(status: str, failure_count: int, progress_note: str = "") -> str:
    """The Celery state of a job: waiting or pending is ``PENDING`` (``RETRY`` once a run
    failed), claimed is ``STARTED`` (or the custom state its last ``update_state``
    named), completed ``SUCCESS``, dead ``FAILURE``, cancelled ``REVOKED``."""
    if status in (Status.WAITING, Status.PENDING):
        return RETRY if failure_count else PENDING
    if status == Status.CLAIMED:
        return progress_note or STARTED
    if status == Status.COMPLETED:
        return SUCCESS
    if status == Status.DEAD:
        return FAILURE
    return REVOKED
