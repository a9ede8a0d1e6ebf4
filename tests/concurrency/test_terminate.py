"""``terminate``: a running job stopped now by real workers, by the strongest means each
pool has, and the journal naming the operator and the means."""

from __future__ import annotations

from typing import Any

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.concurrency.test_process_pool import _gone
from tests.helpers import journal_of, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite]


@pytest.mark.parametrize(
    ("pool", "task", "means"),
    [
        ("process", tasks.long_lease_sleep, "its process-pool child (pid"),
        ("thread", tasks.long_lease_sleep, "its thread abandoned"),
        ("thread", tasks.async_wait, "its coroutine cancelled"),
    ],
    ids=["process-pool", "thread", "event-loop"],
)
def test_terminate_stops_a_running_job_now_naming_the_operator_and_the_means(
    runworker: WorkerProcesses, pool: str, task: Any, means: str
) -> None:
    [worker] = runworker.start_ready("--pool", pool, "--concurrency", "1")
    handle = task.enqueue(seconds=600)
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.CLAIMED, timeout=60)
    run = None
    if task is tasks.long_lease_sleep:  # it records its start: terminated while it runs
        run = wait_for(lambda: Execution.objects.filter(job_id=handle.id).first(), timeout=60)

    handle.terminate(actor="ops@example.com")
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.CANCELLED, timeout=10)
    [entry] = journal_of(handle.id)
    assert entry.outcome == "cancelled"
    assert "terminated by ops@example.com" in entry.note, entry.note
    assert means in entry.note, entry.note
    assert Job.objects.get(id=handle.id).failure_count == 0
    if pool == "process":
        assert run is not None
        wait_for(lambda: _gone(run.pid), timeout=10)

    after = tasks.record.enqueue(n=1)
    wait_for(lambda: Job.objects.get(id=after.id).status == Status.COMPLETED, timeout=60)
    assert worker.alive()
