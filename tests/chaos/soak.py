"""The soak: one ``runworker`` drains many jobs of a mix of outcomes while its resident
memory, threads, open file descriptors and database connections are sampled.

Used by the CI test (``tests/chaos/test_soak.py``, 5,000 jobs) and as a script::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobqueue \\
        python -m tests.chaos.soak --jobs 200000

The script works in a database of its own (the DATABASE_URL's name plus ``_soak``,
dropped at the end) and prints a sample at the start, after each tenth of the jobs and
at the end. Linux only (it reads ``/proc``). The mix: returns (completed), pauses
before completing, fails once then completes, ``Permanent`` (dead), always fails (dead
at its backstop of 3), returns what JSON cannot hold (a failed run, dead at the
backstop of the settings).
"""

from __future__ import annotations

import argparse
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.chaos.scripting import own_database

if TYPE_CHECKING:
    from tests.concurrency.procs import WorkerProcess, WorkerProcesses

# (task name in tests.taskapp.tasks, its arguments, share of the jobs, final status)
MIX: list[tuple[str, dict[str, Any], int, str]] = [
    ("noop", {}, 30, "completed"),
    ("add", {"a": 1, "b": 2}, 15, "completed"),
    ("paginate", {"pages": 3}, 15, "completed"),
    ("fail_times", {"times": 1}, 15, "completed"),
    ("permanent", {"reason": "soak"}, 10, "dead"),
    ("always_fails", {}, 14, "dead"),
    ("returns_unserialisable", {}, 1, "dead"),  # 25 failed runs each
]


@dataclass(frozen=True)
class Sample:
    done: int  # jobs finished (completed or dead)
    seconds: float
    rss_kib: int
    threads: int
    fds: int
    connections: int

    def text(self) -> str:
        return (
            f"{self.done:>8} jobs {self.seconds:>7.1f} s  RSS {self.rss_kib / 1024:6.1f} MiB"
            f"  threads {self.threads}  fds {self.fds}  connections {self.connections}"
        )


@dataclass
class SoakReport:
    jobs: int
    samples: list[Sample] = field(default_factory=list)
    statuses: Counter[tuple[str, str]] = field(default_factory=Counter)  # (kind, status)
    exit_code: int | None = None

    def text(self) -> str:
        lines = [f"soak: one worker, {self.jobs} jobs"]
        lines += [f"  {s.text()}" for s in self.samples]
        lines.append(f"final statuses: {dict(sorted(self.statuses.items()))}")
        lines.append(f"worker exit code after SIGTERM: {self.exit_code}")
        return "\n".join(lines)


def expected_statuses(jobs: int) -> Counter[tuple[str, str]]:
    """Per (kind, status), how many jobs of the mix end so."""
    from tests.taskapp import tasks

    counts = split(jobs)
    return Counter(
        {(getattr(tasks, name).kind, status): counts[name] for name, _, _, status in MIX}
    )


def split(jobs: int) -> dict[str, int]:
    """How many jobs of each task of the mix (the first takes the rounding)."""
    total = sum(share for _, _, share, _ in MIX)
    counts = {name: jobs * share // total for name, _, share, _ in MIX}
    counts[MIX[0][0]] += jobs - sum(counts.values())
    return counts


def enqueue_mix(jobs: int, batch: int = 5000) -> None:
    from django.db import transaction

    from tests.taskapp import tasks

    for (name, kwargs, _, _), n in zip(MIX, split(jobs).values(), strict=True):
        for start in range(0, n, batch):
            with transaction.atomic():
                getattr(tasks, name).enqueue_many([kwargs] * min(batch, n - start))


def finished() -> int:
    from django_jobqueue.models import Job

    return Job.objects.filter(status__in=["completed", "dead"]).count()


def sample(proc: WorkerProcess, done: int, began: float) -> Sample:
    """The worker's figures now, from /proc and pg_stat_activity."""
    from django.db import connections

    status = Path(f"/proc/{proc.pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        )
        row = cursor.fetchone()
    return Sample(
        done=done,
        seconds=time.monotonic() - began,
        rss_kib=int(fields["VmRSS"].split()[0]),
        threads=int(fields["Threads"]),
        fds=len(list(Path(f"/proc/{proc.pid}/fd").iterdir())),
        connections=int(row[0]) if row else 0,
    )


def run_soak(
    jobs: int, procs: WorkerProcesses, *, concurrency: int = 4, timeout: float = 7200
) -> SoakReport:
    """Enqueue the mix, start one worker, sample it as it drains, stop it, report."""
    from django.db import connections
    from django.db.models import Count

    from django_jobqueue.models import Job

    report = SoakReport(jobs=jobs)
    enqueue_mix(jobs)
    # What autovacuum does a little after a bulk load, done now: without statistics the
    # planner misjudges the claim on a table that went from empty to many rows at once.
    with connections["default"].cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")
    [proc] = procs.start_ready("--concurrency", str(concurrency), "--poll-interval", "1")
    began = time.monotonic()
    report.samples.append(sample(proc, finished(), began))
    next_mark = 1
    while True:
        done = finished()
        if done >= jobs * next_mark / 10 or done >= jobs:
            report.samples.append(sample(proc, done, began))
            next_mark = int(done * 10 / jobs) + 1
        if done >= jobs or time.monotonic() > began + timeout or not proc.alive():
            break
        time.sleep(0.5)
    rows = Job.objects.values_list("kind", "status").annotate(n=Count("id")).order_by()
    report.statuses = Counter({(kind, status): n for kind, status, n in rows})
    proc.send(signal.SIGTERM)
    report.exit_code = proc.wait(60)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--concurrency", type=int, default=4)
    options = parser.parse_args(argv)
    with own_database("soak") as procs:
        report = run_soak(options.jobs, procs, concurrency=options.concurrency)
        expected = expected_statuses(options.jobs)
    print(report.text())
    return 0 if report.statuses == expected and report.exit_code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
