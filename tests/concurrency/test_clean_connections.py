"""A ``runworker`` process whose tasks misbehave with its connections or its process: the
next job on the slot still commits, and one SIGTERM still stops the worker in time."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from django_jobqueue import Status
from django_jobqueue.models import Job
from tests.concurrency.procs import WorkerProcess, WorkerProcesses
from tests.helpers import journal_of, postgres_only, wait_for
from tests.taskapp import tasks
from tests.taskapp.models import Effect

pytestmark = [postgres_only, pytest.mark.django_db(transaction=True)]

SHUTDOWN_TIMEOUT = 2.0


def _stops_on_one_sigterm(proc: WorkerProcess) -> None:
    signalled = time.monotonic()
    proc.send(signal.SIGTERM)
    rc = proc.wait(SHUTDOWN_TIMEOUT + 15)
    assert rc == 0, proc.describe()
    assert time.monotonic() - signalled < SHUTDOWN_TIMEOUT + 10, proc.describe()


@pytest.mark.parametrize("how", ["autocommit", "atomic"])
def test_an_atomic_job_after_a_leaking_one_completes_and_one_sigterm_stops_the_worker(
    runworker: WorkerProcesses, how: str
) -> None:
    leak = tasks.leaks.enqueue(how=how)
    later = tasks.atomic_effect.enqueue()
    [proc] = runworker.start_ready(
        "--concurrency", "1", "--shutdown-timeout", str(SHUTDOWN_TIMEOUT)
    )
    wait_for(lambda: Job.objects.get(id=later.id).status == Status.COMPLETED, timeout=20)
    assert Job.objects.get(id=leak.id).status == Status.DEAD
    _stops_on_one_sigterm(proc)

    assert [e.outcome for e in journal_of(later.id)] == ["completed"]
    assert list(Effect.objects.filter(job_id=later.id).values_list("run_no", flat=True)) == [1]
    assert not Effect.objects.filter(job_id=leak.id).exists()
    assert "left a transaction open on 'default'" in journal_of(leak.id)[0].note


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited and not yet reaped, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_forked_child_that_returns_from_its_task_exits_and_leaves_no_orphan(
    runworker: WorkerProcesses,
) -> None:
    handle = tasks.forks.enqueue()
    later = tasks.writes.enqueue()
    [proc] = runworker.start_ready(
        "--concurrency", "1", "--shutdown-timeout", str(SHUTDOWN_TIMEOUT)
    )
    wait_for(lambda: Job.objects.get(id=later.id).status == Status.COMPLETED, timeout=20)
    child = Job.objects.get(id=handle.id).result
    assert isinstance(child, int)
    assert child > 0
    try:
        _stops_on_one_sigterm(proc)
        # The child exits as soon as its task returns: gone (or a zombie) by now.
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child), f"the forked child {child} outlived the worker"
    finally:
        if _running(child):  # the orphan of a failed run of this test
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    # The child ran none of the worker's code: one journal entry per job, both completed.
    assert [e.outcome for e in journal_of(handle.id)] == ["completed"]
    assert [e.outcome for e in journal_of(later.id)] == ["completed"]
