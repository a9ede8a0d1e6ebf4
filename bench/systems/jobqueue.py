"""django_jobqueue: ``runworker`` processes, jobs counted on django_jobqueue_job."""

from __future__ import annotations

import sys

from bench.pg import Conn, read_settlements, scalar
from bench.phases import Settlements
from bench.systems.base import System
from django_jobqueue.worker import LISTENING

NOOP_KIND = "bench.benchapp.tasks.noop"
OTHER_KIND = "bench.filler"  # a kind no worker of the benchmark knows
FUTURE_SHARE = 0.9  # of the filler rows, this much is scheduled an hour or more ahead

FILLER_SQL = """
INSERT INTO django_jobqueue_job (
    id, kind, queue, payload, priority, status, created_at, visible_at,
    claimed_by, run_count, failure_count, carry, cancel_requested, cancel_actor
)
SELECT gen_random_uuid(),
       CASE WHEN g <= %(future)s THEN %(kind)s ELSE %(other)s END,
       'default', '{}'::jsonb, 1, 'pending', now(),
       CASE WHEN g <= %(future)s
            THEN now() + interval '1 hour' + g * interval '1 millisecond'
            ELSE now() + g * interval '1 microsecond' END,
       '', 0, 0, '{}'::jsonb, false, ''
FROM generate_series(1, %(count)s) AS g
"""


class JobQueue(System):
    key = "django_jobqueue"
    slug = "jobqueue"
    aliases = ("jobqueue", "ours")
    packages = ("django-jobqueue", "django", "psycopg")
    settings_module = "bench.djangoproject.settings_jobqueue"
    has_bulk = True
    has_big_table = True
    has_workflows = True
    # It may LISTEN on the connection it claims with, whose last statement is then a
    # claim: it says in its log when it listens.
    ready_line = LISTENING

    def worker_argv(self, concurrency: int) -> list[str]:
        return [sys.executable, "-m", "django", "runworker", "--concurrency", str(concurrency)]

    def worker_note(self, concurrency: int) -> str:
        return (
            f"python -m django runworker --concurrency {concurrency} (default verbosity, "
            "JOBQUEUE defaults: LISTEN/NOTIFY wake-ups, 5 s poll ceiling)"
        )

    def remaining(self, conn: Conn, n: int) -> int:
        # ``n - completed`` rather than ``count(status <> 'completed')``: the same number
        # when the table holds only the drain's jobs, and with a million filler rows it
        # is an index scan over the few completed ones instead of a full scan every 20 ms.
        done = scalar(conn, "SELECT count(*) FROM django_jobqueue_job WHERE status = 'completed'")
        return n - int(done)

    def settlements(self, conn: Conn) -> Settlements | None:
        return read_settlements(conn, "django_jobqueue_job", "finished_at", "status = 'completed'")

    def add_filler(self, conn: Conn, *, total_pending: int, runnable: int) -> None:
        count = total_pending - runnable
        future = int(count * FUTURE_SHARE)
        conn.execute(
            FILLER_SQL,
            {"future": future, "kind": NOOP_KIND, "other": OTHER_KIND, "count": count},
        )
        conn.execute("ANALYZE django_jobqueue_job")
