"""Re-running from a step against a real worker (a ``runworker`` child): refused while
the worker runs the job, whatever the worker then does; once the run has ended, the
worker runs the job again from that step, the steps before it not again."""

from __future__ import annotations

import pytest

from django_jobqueue import InvalidTransition, Status, job
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import recorded, wait_for
from tests.steps.test_memoized import effects
from tests.taskapp import steps_tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db(transaction=True)]

POLL = 1.0
HOLD = 10.0  # seconds the first run works after its step 2: the window to be refused in


def test_a_rerun_is_refused_while_a_worker_runs_the_job_and_then_runs_from_its_step(
    runworker: WorkerProcesses,
) -> None:
    runworker.start_ready("--concurrency", "1", "--poll-interval", str(POLL))
    handle = job(steps_tasks.three.enqueue(hold=HOLD).id)
    wait_for(lambda: len(recorded(handle.id)) == 2, timeout=60)
    with pytest.raises(InvalidTransition, match=r"is running .*a run in flight"):
        handle.rerun_from("s2", actor="ops")
    assert [s["name"] for s in recorded(handle.id)] == ["s1", "s2"]
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)
    assert effects(handle.id) == {"s1": 1, "s2": 1, "s3": 1}

    handle.rerun_from("s2", actor="ops")
    wait_for(lambda: Job.objects.get(id=handle.id).status == Status.COMPLETED, timeout=60)
    finished = Job.objects.get(id=handle.id)
    assert finished.run_count == 2
    assert finished.result == ["s1", "s2", "s3"]
    assert effects(handle.id) == {"s1": 1, "s2": 2, "s3": 2}
    assert [(s["name"], s["run"]) for s in recorded(handle.id)] == [
        ("s1", 1),
        ("s2", 2),
        ("s3", 2),
    ]
