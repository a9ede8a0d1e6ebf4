"""The run side of ``django_jobqueue.signals``: ``job_started`` as a run begins and
``job_finished`` once its settlement is written.

Here, in ``run``, rather than beside the signals: what they carry (a ``JobHandle`` of
the claimed or settled row) comes from the layers below, which the signals module, on
the task API's layer, may not reach. The callers check ``receivers`` first, so a
process with no receiver pays one attribute read per run.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.signals import job_finished, job_started
from django_jobqueue.store import Claimed, NewJob
from django_jobqueue.task.handle import JobHandle
from django_jobqueue.task.signalling import deliver


def started(job: Claimed, *, worker: str) -> None:
    """Send ``job_started`` for a run about to begin (the caller checked for receivers)."""
    deliver(
        job_started,
        "job_started",
        job.kind,
        job.id,
        job=JobHandle(NewJob(job.id, job.kind, status=job.status)),
        queue=job.queue,
        run_no=job.run_count,
        worker=worker,
    )


def finished(settlements: Sequence[Settlement], applied: Sequence[bool]) -> None:
    """Send ``job_finished`` for each settlement that was written (the caller checked for
    receivers); one whose claim was lost meanwhile ended nothing."""
    for s, ok in zip(settlements, applied, strict=True):
        if not ok:
            continue
        duration: timedelta | None = s.duration
        deliver(
            job_finished,
            "job_finished",
            s.kind,
            s.job_id,
            job=JobHandle(NewJob(s.job_id, s.kind, status=s.status, result=s.result)),
            run_no=s.run_no,
            outcome=s.outcome,
            duration=duration,
            note=s.note,
            worker=s.worker,
        )


def finished_in_transaction(
    job: Claimed, value: Any, duration: timedelta | None, *, worker: str
) -> None:
    """Send ``job_finished`` for a run that settled itself, completed, in its own
    transaction (an atomic task, ``ctx.settle_now()``), once that has committed."""
    deliver(
        job_finished,
        "job_finished",
        job.kind,
        job.id,
        job=JobHandle(NewJob(job.id, job.kind, status="completed", result=value)),
        run_no=job.run_count,
        outcome="completed",
        duration=duration,
        note="",
        worker=worker,
    )
