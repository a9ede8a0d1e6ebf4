"""Django tasks on real ``runworker`` processes: run beside our own tasks, and a task
whose worker is SIGKILLed is recovered when its lease ends and completes elsewhere."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import Status, enqueue, store
from django_jobqueue.backend import LeaseExpired
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.djtasks import tasks
from tests.helpers import postgres_only, wait_for
from tests.taskapp import tasks as own_tasks

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]


def test_runworker_runs_django_tasks_alongside_its_own(runworker: WorkerProcesses) -> None:
    [worker] = runworker.start_ready("--concurrency", "4")
    django_results = [tasks.add.enqueue(n, n) for n in range(5)]
    async_result = tasks.async_add.enqueue(1, 2)
    mail = tasks.send_mail.enqueue("ada@example.com")
    own = enqueue(own_tasks.add, 2, 2)
    everything = [*django_results, async_result, mail]
    wait_for(lambda: all(r.status == "SUCCESSFUL" for r in _refreshed(everything)), timeout=30)
    assert [r.return_value for r in django_results] == [0, 2, 4, 6, 8]
    assert async_result.return_value == 3
    assert mail.return_value == "sent to ada@example.com"
    assert {tuple(r.worker_ids) for r in everything} == {(worker.worker_id,)}
    wait_for(lambda: Job.objects.get(id=own.id).status == Status.COMPLETED, timeout=10)


def _refreshed(results: list[Any]) -> list[Any]:
    for result in results:
        result.refresh()
    return results


def test_sigkilled_worker_leaves_no_task_running_and_another_completes_it(
    runworker: WorkerProcesses,
) -> None:
    [doomed] = runworker.start_ready("--concurrency", "1")
    result = tasks.slow_first_attempt.enqueue(seconds=120)
    running = wait_for(
        lambda: (r := tasks.slow_first_attempt.get_result(result.id)).status == "RUNNING" and r,
        timeout=20,
    )
    assert running.worker_ids == [doomed.worker_id]

    doomed.send(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL
    lease_end = Job.objects.get(id=result.id).claim_expires_at
    assert lease_end is not None
    # Nothing settles a killed worker's run: until its lease ends the task shows RUNNING.
    assert tasks.slow_first_attempt.get_result(result.id).status == "RUNNING"
    time.sleep(max((lease_end - timezone.now()).total_seconds(), 0) + 0.1)
    # Once the lease is over, any worker's recovery sweep returns it to READY.
    assert store.recover_expired() == 1
    recovered = tasks.slow_first_attempt.get_result(result.id)
    assert recovered.status == "READY"
    assert [e.exception_class for e in recovered.errors] == [LeaseExpired]
    assert "lease expired" in recovered.errors[0].traceback

    [rescuer] = runworker.start_ready("--concurrency", "1")
    wait_for(lambda: tasks.slow_first_attempt.get_result(result.id).is_finished, timeout=30)
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.return_value == {"attempt": 2, "pid": rescuer.pid}
    assert result.worker_ids == [doomed.worker_id, rescuer.worker_id]
    assert [e.exception_class for e in result.errors] == [LeaseExpired]
    stale, completed = store.journal(job_id=result.id)
    assert (stale.outcome, completed.outcome) == ("stale-recovered", "completed")
    assert stale.recorded_at >= lease_end


def test_sigkilled_worker_task_is_recovered_by_a_running_worker(
    runworker: WorkerProcesses,
) -> None:
    doomed, survivor = runworker.start_ready("--concurrency", "1", count=2)
    result = tasks.slow_first_attempt.enqueue(seconds=120)
    running = wait_for(
        lambda: (r := tasks.slow_first_attempt.get_result(result.id)).status == "RUNNING" and r,
        timeout=20,
    )
    victim = doomed if running.worker_ids == [doomed.worker_id] else survivor
    other = survivor if victim is doomed else doomed
    victim.send(signal.SIGKILL)
    victim.wait(10)
    wait_for(lambda: tasks.slow_first_attempt.get_result(result.id).is_finished, timeout=30)
    result.refresh()
    assert result.status == "SUCCESSFUL"
    assert result.worker_ids == [victim.worker_id, other.worker_id]
    assert result.return_value == {"attempt": 2, "pid": other.pid}
