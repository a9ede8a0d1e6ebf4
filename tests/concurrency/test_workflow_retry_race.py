"""Operators' ``retry_dead()`` calls while ``runworker`` processes drain workflows: none
is left ``running`` once its steps have settled (issue 30, item 1).

A ``retry_dead()`` racing the settlement of a workflow's last step had written
``running`` over ``completed`` (4 of 300 chains stuck so). The fixed interleavings are in
``tests/workflows/test_stuck_running.py``; this is the same race as it happens, the
retries aimed at the workflows still running.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from django_jobqueue import chain, workflow
from django_jobqueue.models import Job
from django_jobqueue.models import Workflow as WorkflowRow
from django_jobqueue.states import UNFINISHED
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import in_thread, row_locking, wait_for
from tests.taskapp import tasks

pytestmark = [row_locking, pytest.mark.django_db(transaction=True)]

CHAINS = 300
ROUNDS = 3  # on main, 1 or 2 of each 300 stuck: three rounds make a miss unlikely
RETRYING = 3
BUDGET = 40.0  # seconds of retries at most; they stop once every step has settled


def _retry_running(stop: threading.Event) -> int:
    """Call ``retry_dead()`` on every workflow still running, again and again."""
    calls = 0
    while not stop.is_set():
        running = list(WorkflowRow.objects.filter(status="running").values_list("id", flat=True))
        for wf_id in running:
            if stop.is_set():
                break
            workflow(wf_id).retry_dead(actor="ops")
            calls += 1
    return calls


def test_retry_dead_while_workers_drain_900_chains_leaves_none_running(
    runworker: WorkerProcesses,
) -> None:
    procs = runworker.start_ready("--concurrency", "4", "--poll-interval", "1", count=2)
    stop = threading.Event()
    retries = [in_thread(lambda: _retry_running(stop)) for _ in range(RETRYING)]
    began = time.monotonic()
    # Enqueued while the workers drain them and the retries run: every chain's last
    # step settles with retries about.
    handles = []
    for _ in range(ROUNDS):
        handles += [
            chain(tasks.wf_value.s(x=i), tasks.wf_value.s(x=i)).enqueue() for i in range(CHAINS)
        ]
    try:
        wait_for(
            lambda: not Job.objects.filter(status__in=UNFINISHED).exists(),
            timeout=BUDGET,
            interval=0.25,
        )
    finally:
        stop.set()
    calls = sum(r.result(60) for r in retries)
    print(
        f"{ROUNDS * CHAINS} chains settled in {time.monotonic() - began:.1f}s; "
        f"{calls} retry_dead calls"
    )
    for proc in procs:
        assert proc.alive(), proc.describe()
        proc.send(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(30) == 0, proc.describe()

    ids = [h.id for h in handles]
    statuses = dict(WorkflowRow.objects.filter(id__in=ids).values_list("id", "status"))
    stuck = [wf_id for wf_id, status in statuses.items() if status != "completed"]
    assert stuck == [], f"{len(stuck)} of {len(ids)} workflows not completed: {stuck[:5]}"
    assert set(WorkflowRow.objects.filter(id__in=ids).values_list("steps_open", flat=True)) == {0}
