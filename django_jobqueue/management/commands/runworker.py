"""``manage.py runworker``: run a worker until SIGTERM/SIGINT (or, with --burst, until idle)."""

from __future__ import annotations

import logging
import sys
from argparse import SUPPRESS, ArgumentParser, ArgumentTypeError
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from django_jobqueue import conf, routing
from django_jobqueue.errors import ConfigurationError, JobQueueError
from django_jobqueue.management.arguments import (
    async_concurrency,
    concurrency,
    kind_name,
    positive_int,
    positive_seconds,
    processes,
    queue_name,
    seconds,
)
from django_jobqueue.task.registry import registry
from django_jobqueue.worker import heap, supervisor
from django_jobqueue.worker.loop import Worker


class LineFormatter(logging.Formatter):
    """Every line of a record gets the prefix: the worker logs a turn's settlements as
    one record of one line each, and each line stays a whole log line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if "\n" not in message or record.exc_info or record.stack_info:
            return super().format(record)
        lines = message.split("\n")
        record.msg, record.args = lines[0], None
        try:
            first = super().format(record)
            prefix = first[: len(first) - len(lines[0])]
            return "\n".join([first, *(prefix + line for line in lines[1:])])
        finally:
            record.msg = message


def _cap(text: str) -> tuple[str, int]:
    kind, sep, number = text.rpartition("=")
    if not sep or not kind:
        raise ArgumentTypeError(f"--cap takes KIND=N, got {text!r}")
    try:
        kind = kind_name(kind)
    except ArgumentTypeError as exc:
        raise ArgumentTypeError(f"--cap: KIND {exc}") from None
    try:
        return kind, positive_int(number)
    except ArgumentTypeError as exc:
        raise ArgumentTypeError(f"--cap {kind}: N {exc}") from None


class Command(BaseCommand):
    help = "Run a django_jobqueue worker."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            type=queue_name,
            default=[],
            help="Only claim from this queue (repeatable; default: all).",
        )
        parser.add_argument(
            "--kind",
            action="append",
            dest="kinds",
            type=kind_name,
            default=[],
            help="Only claim this kind (repeatable; default: all known kinds).",
        )
        parser.add_argument(
            "--concurrency",
            type=concurrency,
            default=None,
            help="Jobs in flight at once (default: JOBQUEUE CONCURRENCY).",
        )
        parser.add_argument(
            "--async-concurrency",
            type=async_concurrency,
            default=None,
            help="async def jobs in flight at once on the event loop "
            "(default: JOBQUEUE ASYNC_CONCURRENCY, 100).",
        )
        parser.add_argument(
            "--cap",
            type=_cap,
            action="append",
            dest="caps",
            default=[],
            metavar="KIND=N",
            help="At most N jobs of KIND in flight (repeatable).",
        )
        parser.add_argument(
            "--burst", action="store_true", help="Drain what is claimable now, then exit."
        )
        parser.add_argument(
            "--max-jobs", type=positive_int, default=None, help="Exit after this many jobs."
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=seconds,
            default=None,
            help="Seconds to let running jobs finish after SIGTERM.",
        )
        parser.add_argument(
            "--poll-interval",
            type=positive_seconds,
            default=None,
            help="Longest wait between looks at the queue, in seconds.",
        )

        self._process_arguments(parser)

    def _process_arguments(self, parser: ArgumentParser) -> None:
        """Which database, how many worker processes, and when one is replaced."""
        parser.add_argument(
            "--database",
            default=None,
            metavar="ALIAS",
            help="Serve this queue database only (default: every one JOBQUEUE names: "
            "DATABASE, or each of DATABASES, in worker processes of their own).",
        )
        parser.add_argument(
            "--processes",
            type=processes,
            default=None,
            help="Worker processes to run and supervise; auto: one per CPU "
            "(default: JOBQUEUE PROCESSES, 1).",
        )
        parser.add_argument(
            "--max-jobs-per-child",
            type=positive_int,
            default=None,
            help="Replace a worker process after it has run this many jobs.",
        )
        parser.add_argument(
            "--max-memory-per-child",
            type=positive_int,
            default=None,
            metavar="MIB",
            help="Replace a worker process (with --pool process: a pool child) once its "
            "resident memory passes this many MiB.",
        )
        parser.add_argument(
            "--pool",
            choices=conf.POOLS,
            default=None,
            help="Run sync jobs on slot threads or each slot's job in a child process, "
            "which a hard time limit or a terminate kills (default: JOBQUEUE POOL, thread).",
        )
        parser.add_argument(
            "--max-tasks-per-child",
            type=positive_int,
            default=None,
            help="With --pool process: replace a pool child after it has run this many jobs.",
        )
        # A child of a supervising runworker: it exits with a status saying why.
        parser.add_argument("--supervised", action="store_true", help=SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            settings = conf.get()
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        capped = [kind for kind, _ in options["caps"]]
        unknown = sorted(set(options["kinds"] + capped) - set(registry.kinds()))
        if unknown:
            known = ", ".join(registry.kinds())
            raise CommandError(f"{', '.join(unknown)}: no such task kind. Known: {known}")
        _log_to_stderr(options["verbosity"])
        if options["database"] is not None:
            try:
                routing.serve(options["database"])
            except ConfigurationError as exc:
                raise CommandError(f"--database: {exc}") from exc
        count = options["processes"] or settings.processes
        pool = options["pool"] or settings.pool
        if options["max_tasks_per_child"] is not None and pool != "process":
            raise CommandError(
                "--max-tasks-per-child recycles process-pool children: it needs --pool "
                "process (for worker processes, use --max-jobs-per-child)"
            )
        # With the process pool, the memory bound is each pool child's, not the worker's.
        memory = options["max_memory_per_child"] if pool != "process" else None
        per_child = options["max_jobs_per_child"] or memory
        if options["supervised"]:
            sys.exit(self._child(options))
        if count > 1 or per_child or (options["database"] is None and routing.several()):
            self._supervise(count, options, settings)
            return
        worker = self._worker(options, max_jobs=options["max_jobs"])
        worker.install_signal_handlers()
        with heap.tuned():
            worker.run()

    def _worker(self, options: dict[str, Any], *, max_jobs: int | None) -> Worker:
        try:
            return Worker(
                queues=options["queues"],
                kinds=options["kinds"],
                concurrency=options["concurrency"],
                async_concurrency=options["async_concurrency"],
                caps=dict(options["caps"]),
                burst=options["burst"],
                max_jobs=max_jobs,
                shutdown_timeout=options["shutdown_timeout"],
                poll_interval=options["poll_interval"],
                pool=options["pool"],
                max_tasks_per_child=options["max_tasks_per_child"],
                max_memory_per_child=(
                    options["max_memory_per_child"]
                    if (options["pool"] or conf.get().pool) == "process"
                    else None
                ),
            )
        except JobQueueError as exc:  # a periodic schedule that does not fit its task
            raise CommandError(str(exc)) from exc

    def _child(self, options: dict[str, Any]) -> int:
        """Run as one supervised worker process; the exit status says why it ended."""
        quota = options["max_jobs_per_child"]
        worker = self._worker(options, max_jobs=quota)
        memory = None if worker.pool == "process" else options["max_memory_per_child"]
        watch = supervisor.Supervised(worker.stop, max_memory_mib=memory)
        watch.install()
        try:
            with heap.tuned():
                worker.run()
        finally:
            watch.finish()
        if watch.memory_exceeded:
            return supervisor.EXIT_RECYCLE_MEMORY
        if quota is not None and worker.claimed >= quota:
            return supervisor.EXIT_RECYCLE_JOBS
        return supervisor.EXIT_STOPPED

    def _supervise(self, count: int, options: dict[str, Any], settings: conf.Settings) -> None:
        if options["max_jobs"] is not None:
            raise CommandError(
                "--max-jobs counts the jobs of one worker process; with --processes or a "
                "per-child limit, use --max-jobs-per-child"
            )
        # Checked here, not first in a child that would fail at every restart.
        self._worker(options, max_jobs=None)
        timeout = options["shutdown_timeout"]
        # Without --database, each queue database gets ``count`` processes of its own: a
        # process serves one database, so one that is down stops only its own loops.
        served: list[str | None] = [options["database"]]
        if options["database"] is None and routing.several():
            served = list(routing.aliases())
        argvs = [child_argv({**options, "database": alias}) for alias in served]
        sup = supervisor.Supervisor(
            argv=argvs[0],
            argvs=argvs if len(argvs) > 1 else (),
            count=count * len(argvs),
            shutdown_timeout=(
                settings.shutdown_timeout.total_seconds() if timeout is None else timeout
            ),
            burst=options["burst"],
            liveness=supervisor.liveness_bound(settings.lease.total_seconds()),
            on_death=supervisor.recover_at_once,
            run_forked=run_forked,
        )
        # The first children are forked from this process (Django set up, the options
        # checked): it must hold no connection to hand down, and no thread yet.
        connections.close_all()
        with heap.tuned():  # before the fork: the children share the frozen pages
            sup.start()
            sup.install_signal_handlers()
            sup.run()


def run_forked(argv: Sequence[str]) -> int:
    """Run a supervised child's command line (``child_argv``'s) in a child the supervisor
    forked: as the fresh interpreter would run it, but with Django set up already and
    without the system checks this command just ran on the same code. Its exit status
    (``handle`` exits with it)."""
    args = list(argv)
    Command().run_from_argv(["django", *args[args.index("runworker") :], "--skip-checks"])
    return supervisor.EXIT_STOPPED


def child_argv(options: dict[str, Any]) -> list[str]:
    """The command line of one supervised worker process: this command's options, but
    one process each, with the per-child limits as its own."""
    argv = [sys.executable, "-m", "django", "runworker", "--supervised"]
    argv += ["--verbosity", str(options["verbosity"])]
    for queue in options["queues"]:
        argv += ["--queue", queue]
    for kind in options["kinds"]:
        argv += ["--kind", kind]
    for kind, cap in options["caps"]:
        argv += ["--cap", f"{kind}={cap}"]
    if options["burst"]:
        argv.append("--burst")
    if options.get("database") is not None:
        argv += ["--database", options["database"]]
    for name in (
        "concurrency",
        "async_concurrency",
        "shutdown_timeout",
        "poll_interval",
        "max_jobs_per_child",
        "max_memory_per_child",
        "pool",
        "max_tasks_per_child",
    ):
        if options[name] is not None:
            argv += [f"--{name.replace('_', '-')}", str(options[name])]
    return argv


def _log_to_stderr(verbosity: int) -> None:
    logger = logging.getLogger("django_jobqueue")
    # Only when no handler would write the lines already (the project's own LOGGING,
    # on this logger or an ancestor such as root): otherwise every line came twice.
    if verbosity >= 1 and not logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(LineFormatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
    if verbosity >= 1 and logger.level == logging.NOTSET:
        logger.setLevel(logging.DEBUG if verbosity > 1 else logging.INFO)
