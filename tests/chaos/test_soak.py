"""The soak's CI form: one worker drains 2,000 jobs of a mix of outcomes; its threads,
open files and database connections stay where they were once it had warmed up, and
its resident memory within a bound that catches a leak of a few KiB per job.

``JOBQUEUE_LONG_TESTS=1`` runs the former CI form, 5,000 jobs; ``python -m
tests.chaos.soak --jobs 200000`` the long form (see ``soak.py``).
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.chaos.soak import expected_statuses, run_soak
from tests.concurrency.procs import WorkerProcesses
from tests.helpers import postgres_only

pytestmark = [
    postgres_only,
    pytest.mark.chaos,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

JOBS = 5000 if os.environ.get("JOBQUEUE_LONG_TESTS") == "1" else 2000


@pytest.mark.timeout(600)
def test_a_worker_draining_thousands_of_jobs_holds_its_threads_connections_and_memory(
    runworker: WorkerProcesses,
) -> None:
    report = run_soak(JOBS, runworker)
    print(report.text())

    assert report.statuses == expected_statuses(JOBS), report.text()
    assert report.exit_code == 0, runworker.describe()
    start, warm, end = report.samples[0], report.samples[1], report.samples[-1]
    assert warm.done >= JOBS // 10
    assert end.done == JOBS
    # Threads and connections are fixed once the worker runs: one per slot, its loop,
    # its listener. File descriptors (sockets, the log) too.
    assert end.threads == warm.threads, report.text()
    assert end.connections <= warm.connections, report.text()
    assert end.fds <= warm.fds + 2, report.text()
    # Memory: nothing held per job. Django and the first runs warm caches up, so the
    # bound is taken from the warm sample: a tenth of it plus 8 MiB, some 13 MiB on a
    # 55 MiB worker, which a leak of 8 KiB per job passes over the 1,800 jobs after it
    # (the long form's worker grows 2.6 MiB over 200,000 jobs).
    assert end.rss_kib <= warm.rss_kib * 1.1 + 8 * 1024, report.text()
    assert start.threads <= end.threads
