"""The autovacuum soak: sustained load on a PostgreSQL that vacuums as production does.

The development server runs with autovacuum off; a production server never does. This
soak makes a throw-away cluster (``pgserver.ThrowawayPostgres``: ``initdb`` defaults,
autovacuum on), migrates it, starts two ``runworker`` children with ``RETENTION`` on
(completed jobs kept ``--keep`` seconds, pruned every ``--prune-every``: the table is
deleted from all the time) and a producer that enqueues no-op jobs at a fixed rate.
Every ``--sample-every`` seconds it records, from the server:

- throughput: the jobs completed in the interval (their journal entries);
- pickup latency p50/p99: a run's ``started_at`` minus its job's ``visible_at``;
- the jobs table's heap, its indexes and the journal's total size;
- dead tuples, HOT updates and autovacuum/autoanalyze counts (``pg_stat_user_tables``);
- the backlog (pending and claimed jobs).

Before the measured run, ``--warmup`` seconds of the same load are drained and the
jobs table is ANALYZEd (a table in use has statistics). When the producer is done the
workers drain what is left; then every enqueued job must have completed exactly once
(the run tally, which every settlement adds to and pruning keeps). An interval is read from the
journal, so ``--keep`` must be longer than ``--sample-every`` (and a little more).

Used by the CI test (``tests/chaos/test_autovacuum_soak.py``, 3 minutes) and as a script
(it needs the PostgreSQL server binaries; the DATABASE_URL server is not used)::

    python -m tests.chaos.autovacuum_soak --minutes 30 --rate 500 --json soak.json

It prints a table of the samples and a summary (first and last sixth of the run: five
minutes of thirty), and writes everything as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django_jobqueue.worker import LISTENING
from tests.chaos import pgserver
from tests.chaos.soak_figures import Sample, Summary, Vacuum, summarise, table, vacuums

REPO_ROOT = Path(__file__).resolve().parents[2]
DBNAME = "jobqueue_autovacuum"
JOB = "django_jobqueue_job"
JOURNAL = "django_jobqueue_journalentry"
RUNWORKER = (sys.executable, "-m", "django", "runworker")
PRODUCER = (sys.executable, "-m", "tests.chaos.paced_producer")
PICKUP = "extract(epoch FROM e.started_at - j.visible_at)"  # seconds
# Nothing about vacuum changed from initdb's defaults; only what it and slow statements
# do is logged (the server log is kept beside the worker logs).
SERVER_LOGGING = (
    "log_autovacuum_min_duration=0",
    "log_min_duration_statement=250",
    "log_lock_waits=on",
)
LAG = 2.0  # seconds: a window closes this long before it is read (late commits land)


@dataclass(frozen=True)
class SoakConfig:
    seconds: float = 180.0  # how long the producer runs
    rate: float = 500.0  # jobs per second it enqueues
    workers: int = 2
    concurrency: int = 8
    keep: float = 30.0  # RETENTION of completed jobs, seconds
    prune_every: float = 10.0  # RETENTION_INTERVAL, seconds
    sample_every: float = 10.0
    drain_timeout: float = 120.0
    # Seconds of load before the measured run, drained, then ANALYZE (0: none; see warm_up).
    warmup: float = 20.0
    # Storage parameters set on the jobs table before the run ("fillfactor=90", …): the
    # way to compare a setting with and without it in one sitting.
    storage: tuple[str, ...] = ()
    # Server settings ("autovacuum_naptime=10", …) on top of initdb's defaults.
    server: tuple[str, ...] = ()
    # The journal partitioned by day (``jobqueue partitions --convert``) before the run.
    partitioned: bool = False


@dataclass
class SoakReport:
    config: SoakConfig
    server: dict[str, str] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    sent: int = 0
    producer_lag: float = 0.0  # seconds the producer was ever behind its schedule
    completed_runs: int = 0  # completed runs in the run tally (pruned ones included)
    other_runs: int = 0  # runs that ended any other way (none expected)
    left: int = 0  # jobs not completed at the end
    exit_codes: list[int | None] = field(default_factory=list)
    # The server log's autovacuum visits of the jobs table: when, pages it truncated
    # away, pages left, seconds it took.
    vacuums: list[Vacuum] = field(default_factory=list)
    summary: Summary | None = None

    def text(self) -> str:
        c = self.config
        head = (
            f"autovacuum soak: {c.seconds:.0f} s at {c.rate:.0f} jobs/s, {c.workers} workers"
            f" x {c.concurrency}, RETENTION {c.keep:.0f} s every {c.prune_every:.0f} s,"
            f" warm-up {c.warmup:.0f} s, storage {list(c.storage) or 'default'},"
            f" server {list(c.server) or 'default'},"
            f" journal {'partitioned' if c.partitioned else 'one table'}; {self.server}"
        )
        tail = [
            f"sent {self.sent} (producer lag at most {self.producer_lag:.2f} s),"
            f" completed runs {self.completed_runs}, other runs {self.other_runs},"
            f" jobs left {self.left}, worker exit codes {self.exit_codes}",
        ]
        tail += [f"autovacuum of the jobs table: {v.text()}" for v in self.vacuums]
        if self.summary is not None:
            tail.append(self.summary.text())
        return "\n".join([head, table(self.samples), *tail])

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def child_env(url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *filter(None, [os.getenv("PYTHONPATH")])]),
        "DATABASE_URL": url,
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def query(conn: Any, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = conn.execute(statement, params).fetchall()
    return rows


def migrate(url: str, *command: str) -> None:
    """``manage.py migrate`` on ``url``'s database, or another ``command``."""
    done = subprocess.run(
        [sys.executable, "-m", "django", *(command or ("migrate", "--verbosity", "0"))],
        cwd=REPO_ROOT,
        env=child_env(url),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command or 'migrate'} failed:\n{done.stdout}\n{done.stderr}")


def start_workers(url: str, config: SoakConfig, log_dir: Path) -> list[subprocess.Popen[bytes]]:
    env = child_env(
        url,
        DJANGO_SETTINGS_MODULE="tests.chaos.autovacuum_settings",
        JOBQUEUE_SOAK_KEEP=str(config.keep),
        JOBQUEUE_SOAK_PRUNE_EVERY=str(config.prune_every),
    )
    workers = []
    for n in range(config.workers):
        with (log_dir / f"runworker-{n}.log").open("wb") as log:
            workers.append(
                subprocess.Popen(
                    [*RUNWORKER, "--concurrency", str(config.concurrency)],
                    cwd=REPO_ROOT,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return workers


def start_producer(url: str, rate: float, seconds: float, out: Path) -> subprocess.Popen[bytes]:
    with out.open("wb") as stdout:
        return subprocess.Popen(
            [*PRODUCER, "--rate", str(rate), "--seconds", str(seconds)],
            cwd=REPO_ROOT,
            env=child_env(url),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.STDOUT,
        )


def wait_listening(conn: Any, workers: list[subprocess.Popen[bytes]], log_dir: Path) -> None:
    """Until every worker has logged that it listens for new jobs (its loop runs)."""
    deadline = time.monotonic() + 60
    while True:
        logs = [
            (log_dir / f"runworker-{n}.log").read_text(errors="replace")
            for n in range(len(workers))
        ]
        if all(LISTENING in log for log in logs):
            return
        if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
            raise RuntimeError(f"workers did not start listening; logs in {log_dir}")
        time.sleep(0.2)


def server_settings(conn: Any) -> dict[str, str]:
    names = ["server_version", "autovacuum", "autovacuum_naptime", "fsync", "shared_buffers"]
    rows = query(conn, "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (names,))
    [(options,)] = query(
        conn, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = %s", (JOB,)
    )
    return {**dict(rows), "jobs_table_options": ",".join(options)}


def take_sample(conn: Any, start: Any, since: Any, phase: str) -> tuple[Sample, Any]:
    """The figures of the interval [since, now - LAG) and the sizes now."""
    [(until,)] = query(conn, "SELECT clock_timestamp() - make_interval(secs => %s)", (LAG,))
    [(done, p50, p99)] = query(
        conn,
        "SELECT count(*),"
        f" percentile_cont(0.5) WITHIN GROUP (ORDER BY {PICKUP}),"
        f" percentile_cont(0.99) WITHIN GROUP (ORDER BY {PICKUP})"
        f" FROM {JOURNAL} e JOIN {JOB} j ON j.id = e.job_id"
        " WHERE e.outcome = 'completed' AND e.recorded_at >= %s AND e.recorded_at < %s",
        (since, until),
    )
    [sizes] = query(
        conn,
        "SELECT pg_relation_size(%s), pg_indexes_size(%s), pg_total_relation_size(%s),"
        # A partitioned journal's size is its partitions' (the parent has no storage).
        " (SELECT coalesce(sum(pg_total_relation_size(relid)) FILTER (WHERE isleaf),"
        " pg_total_relation_size(%s)) FROM pg_partition_tree(%s))",
        (JOB, JOB, JOB, JOURNAL, JOURNAL),
    )
    stats = {
        name: row
        for name, *row in query(
            conn,
            "SELECT relname, n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count,"
            " autoanalyze_count FROM pg_stat_user_tables WHERE relname IN (%s, %s)",
            (JOB, JOURNAL),
        )
    }
    [(pending, claimed)] = query(
        conn,
        f"SELECT count(*) FILTER (WHERE status = 'pending'),"
        f" count(*) FILTER (WHERE status = 'claimed') FROM {JOB}",
    )
    job, journal = stats[JOB], stats.get(JOURNAL, [0] * 6)
    return Sample(
        phase=phase,
        t0=(since - start).total_seconds(),
        t1=(until - start).total_seconds(),
        completed=int(done),
        p50_ms=None if p50 is None else float(p50) * 1000,
        p99_ms=None if p99 is None else float(p99) * 1000,
        pending=int(pending),
        claimed=int(claimed),
        heap_bytes=int(sizes[0]),
        index_bytes=int(sizes[1]),
        total_bytes=int(sizes[2]),
        journal_bytes=int(sizes[3]),
        live=int(job[0]),
        dead=int(job[1]),
        updates=int(job[2]),
        hot_updates=int(job[3]),
        autovacuums=int(job[4]),
        autoanalyzes=int(job[5]),
        journal_autovacuums=int(journal[4]),
    ), until


def index_sizes(conn: Any) -> dict[str, int]:
    rows = query(
        conn,
        "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index"
        " WHERE indrelid = %s::regclass ORDER BY 1",
        (JOB,),
    )
    return {name: int(size) for name, size in rows}


def sample_while(
    conn: Any, report: SoakReport, window: tuple[Any, Any], busy: Any, phase: str
) -> Any:
    """Sample every ``sample_every`` seconds while ``busy()`` holds; ``window`` is the run's
    start and where the next interval begins (server clock). Returns where it ended."""
    start, since = window
    while busy():
        time.sleep(report.config.sample_every)
        sample, since = take_sample(conn, start, since, phase)
        report.samples.append(sample)
        print(sample.row(), flush=True)
    return since


def tally(conn: Any, report: SoakReport) -> None:
    """How the runs ended, from the run tally (every settlement adds its run to it, and
    pruning keeps it); the live journal must agree with it; what is left."""
    [(done, other)] = query(
        conn,
        "SELECT count(*) FILTER (WHERE outcome = 'completed'),"
        f" count(*) FILTER (WHERE outcome <> 'completed') FROM {JOURNAL}",
    )
    [(tallied_done, tallied_other)] = query(
        conn,
        "SELECT coalesce(sum(runs) FILTER (WHERE outcome = 'completed'), 0),"
        " coalesce(sum(runs) FILTER (WHERE outcome <> 'completed'), 0)"
        " FROM django_jobqueue_runtally",
    )
    [(left,)] = query(conn, f"SELECT count(*) FROM {JOB} WHERE status <> 'completed'")
    # The journal still holds the runs not yet pruned: never more than the tally counted.
    assert int(done) <= int(tallied_done), (done, tallied_done)
    report.completed_runs = int(tallied_done)
    report.other_runs = max(int(tallied_other), int(other))
    report.left = int(left)


def backlog(conn: Any) -> int:
    [(n,)] = query(conn, f"SELECT count(*) FROM {JOB} WHERE status IN ('pending', 'claimed')")
    return int(n)


def drive(url: str, config: SoakConfig, log_dir: Path, report: SoakReport) -> None:
    """Workers, a warm-up, then the producer; sample until it is done and drained."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for option in config.storage:
            conn.execute(f"ALTER TABLE {JOB} SET ({option})")
        report.server = server_settings(conn)
        workers = start_workers(url, config, log_dir)
        try:
            wait_listening(conn, workers, log_dir)
            if config.warmup:
                warm_up(conn, url, config, log_dir, report)
            measure(conn, url, config, log_dir, report)
            time.sleep(LAG)
            tally(conn, report)
        finally:
            report.exit_codes = stop(workers)
        report.summary = summarise(report.samples, config.seconds, index_sizes(conn))


class Production:
    """A producer run: ``running()`` while it enqueues, ``finish()`` adds what it sent."""

    def __init__(self, url: str, rate: float, seconds: float, out: Path) -> None:
        self.out = out
        self.popen = start_producer(url, rate, seconds, out)

    def running(self) -> bool:
        return self.popen.poll() is None

    def finish(self, report: SoakReport) -> None:
        if self.popen.wait() != 0:
            raise RuntimeError(f"producer failed:\n{self.out.read_text()[-3000:]}")
        _, sent, _, lag = self.out.read_text().split()
        report.sent += int(sent)
        report.producer_lag = max(report.producer_lag, float(lag))


def warm_up(conn: Any, url: str, config: SoakConfig, log_dir: Path, report: SoakReport) -> None:
    """Load the table for ``warmup`` seconds, drain it, then ANALYZE: a jobs table in use
    has statistics. A table never analyzed (a fresh install, or after ``pg_upgrade``)
    gets plans that scan it whole on every turn until autovacuum's first ANALYZE, which
    the default naptime makes up to a minute away; ``warmup=0`` measures that."""
    production = Production(url, config.rate, config.warmup, log_dir / "warmup.out")
    deadline = time.monotonic() + config.warmup + config.drain_timeout
    while (production.running() or backlog(conn) > 0) and time.monotonic() < deadline:
        time.sleep(0.5)
    production.finish(report)
    conn.execute(f"ANALYZE {JOB}")
    conn.execute(f"ANALYZE {JOURNAL}")


def first_enqueue(conn: Any, asked: Any, production: Production) -> Any:
    """When the producer's first job was written: the run's clock starts there, not
    while the producer is still importing Django."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and production.running():
        [(first,)] = query(
            conn, f"SELECT min(created_at) FROM {JOB} WHERE created_at >= %s", (asked,)
        )
        if first is not None:
            return first
        time.sleep(0.05)
    raise RuntimeError("the producer wrote no job within a minute")


def measure(conn: Any, url: str, config: SoakConfig, log_dir: Path, report: SoakReport) -> None:
    [(asked,)] = query(conn, "SELECT clock_timestamp()")
    production = Production(url, config.rate, config.seconds, log_dir / "producer.out")
    start = first_enqueue(conn, asked, production)
    since = sample_while(conn, report, (start, start), production.running, "produce")
    production.finish(report)
    deadline = time.monotonic() + config.drain_timeout
    sample_while(
        conn,
        report,
        (start, since),
        lambda: backlog(conn) > 0 and time.monotonic() < deadline,
        "drain",
    )


def stop(workers: list[subprocess.Popen[bytes]]) -> list[int | None]:
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for w in workers:
        try:
            codes.append(w.wait(60))
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait(10)
            codes.append(None)
    return codes


def run_soak(config: SoakConfig, log_dir: Path) -> SoakReport:
    """The whole soak on a throw-away cluster, removed at the end."""
    report = SoakReport(config=config)
    pg = pgserver.ThrowawayPostgres()
    try:
        pg.init(*SERVER_LOGGING, *config.server)
        pg.start()
        pg.create_database(DBNAME)
        url = pg.url(DBNAME)
        migrate(url)
        if config.partitioned:
            migrate(url, "jobqueue", "partitions", "--convert")
        drive(url, config, log_dir, report)
    finally:
        with contextlib.suppress(OSError):
            shutil.copy(pg.logfile, log_dir / "postgres.log")
            report.vacuums = vacuums((log_dir / "postgres.log").read_text(errors="replace"))
        pg.close()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--keep", type=float, default=60.0, help="RETENTION, seconds")
    parser.add_argument("--prune-every", type=float, default=15.0)
    parser.add_argument("--sample-every", type=float, default=15.0)
    parser.add_argument("--storage", action="append", default=[], help="e.g. fillfactor=90")
    parser.add_argument("--server", action="append", default=[], help="e.g. autovacuum_naptime=10")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds; 0: none")
    parser.add_argument("--partitioned", action="store_true", help="the journal by day")
    parser.add_argument("--json", type=Path, default=Path("autovacuum-soak.json"))
    parser.add_argument("--logs", type=Path, default=None, help="worker logs (default: a temp dir)")
    options = parser.parse_args(argv)
    if options.keep <= options.sample_every + LAG:
        parser.error(f"--keep must be longer than --sample-every + {LAG} s")
    unavailable = pgserver.unavailable()
    if unavailable:
        raise SystemExit(f"cannot make a throw-away PostgreSQL: {unavailable}")
    config = SoakConfig(
        seconds=options.minutes * 60,
        rate=options.rate,
        concurrency=options.concurrency,
        keep=options.keep,
        prune_every=options.prune_every,
        sample_every=options.sample_every,
        drain_timeout=max(120.0, options.minutes * 10),
        storage=tuple(options.storage),
        server=tuple(options.server),
        warmup=options.warmup,
        partitioned=options.partitioned,
    )
    import tempfile

    log_dir = options.logs or Path(tempfile.mkdtemp(prefix="jobqueue-autovacuum-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    report = run_soak(config, log_dir)
    print(report.text())
    options.json.write_text(json.dumps(report.as_json(), indent=1, default=str))
    print(f"JSON: {options.json}; worker logs: {log_dir}")
    ok = report.left == 0 and report.completed_runs == report.sent and not report.other_runs
    return 0 if ok and report.exit_codes == [0] * config.workers else 1


if __name__ == "__main__":
    raise SystemExit(main())
