"""Liveness around ``claiming.look_again`` with real worker threads: with the poll and the
services an hour away, a capped kind's next jobs and a chain's next steps are still
claimed, nothing stalls. These guard against a stall only; they do not tell the rules
apart (a busy worker also wakes each time a run ends), which tests/unit/test_look_again.py
pins down rule by rule."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_jobqueue import Status, chain
from django_jobqueue.models import Job
from django_jobqueue.worker.services.base import Timings
from tests.helpers import WorkerThread, wait_for
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db(transaction=True)]

POLL = 3600.0  # no test here may wait on a poll, nor on a service's wake-up
QUIET = Timings(
    recover=POLL, cancel_check=POLL, heartbeat=POLL, retention=POLL, limits=POLL, schedules=POLL
)


def test_a_capped_kinds_next_job_is_claimed_when_the_cap_frees(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    # A long run keeps the worker busy: an idle one would look on its own (next_wakeup).
    tasks.cooperative.enqueue(seconds=60)
    jobs = [tasks.capped.enqueue(seconds=0) for _ in range(3)]
    worker_thread(
        concurrency=4,
        caps={tasks.capped.kind: 1},
        poll_interval=POLL,
        shutdown_timeout=5,
        timings=QUIET,
    )
    ids = [j.id for j in jobs]
    wait_for(
        lambda: Job.objects.filter(id__in=ids, status=Status.COMPLETED).count() == 3,
        timeout=20,
    )


def test_a_chain_moves_on_without_a_poll(worker_thread: Callable[..., WorkerThread]) -> None:
    handle = chain(*(tasks.wf_value.s(x=i) for i in range(10))).enqueue()
    worker_thread(concurrency=4, poll_interval=POLL, timings=QUIET)
    steps = [s.id for s in handle.steps.values()]
    wait_for(
        lambda: Job.objects.filter(id__in=steps, status=Status.COMPLETED).count() == 10,
        timeout=20,
    )
