"""``manage.py jobqueue``: look at the queue and steer jobs from a shell.

Subcommands: ``stats``, ``list``, ``show ID``, ``cancel ID…``, ``requeue ID…``,
``cleanup``, ``pause QUEUE…``, ``resume QUEUE…``, ``limit [KIND]``, ``schedules``,
``workflows``, ``workflow ID`` and ``health``. Every read and write goes through
:mod:`django_jobqueue.store`, exactly as the admin's do.
"""

from __future__ import annotations

import getpass
import json
import uuid
from argparse import ArgumentParser
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from django.utils import timezone

from django_jobqueue import conf, store
from django_jobqueue.errors import (
    ConfigurationError,
    InvalidLimit,
    InvalidTransition,
    JobNotFound,
    JobQueueError,
)
from django_jobqueue.formatting import fmt_age
from django_jobqueue.management import bulk, rerun, show, steps, subparsers, workflows
from django_jobqueue.management.arguments import (
    parse_duration,
    parse_job_id,
    queue_name,
)
from django_jobqueue.management.report import (
    fmt_time,
    json_default,
    render_stats,
    table,
)
from django_jobqueue.models import Status
from django_jobqueue.task import limiting
from django_jobqueue.task.periodic import overview as schedule_overview
from django_jobqueue.task.registry import registry


def operator() -> str:
    """Who acts, as recorded in the journal: the command and the OS user running it."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (e.g. a container's uid without a passwd entry)
        user = "unknown user"
    return f"manage.py jobqueue ({user})"


# jobqueue health's exit status when workers are alive but runnable jobs are of kinds
# none of them runs (1 is unhealthy, 2 a bad command line): a probe can tell it apart.
UNSERVED_EXIT = 3


class Command(BaseCommand):
    help = (
        "Inspect and steer the job queue: stats, list, show, cancel, requeue, cleanup, "
        "pause, resume, limit, schedules, workflows, workflow, health."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND", required=True)

        p = sub.add_parser("stats", help="Backlog, claims, failures, workers and run statistics.")
        p.add_argument("--json", action="store_true", help="Print machine-readable JSON.")
        p.add_argument("--key", help="Only KEY's pending and in-flight jobs, by kind.")
        p.add_argument(
            "--window",
            type=parse_duration,
            default=timedelta(hours=24),
            help="Run statistics over this much recent history (default 24h).",
        )
        subparsers.list_arguments(
            sub.add_parser("list", help="List jobs, oldest first, a page at a time.")
        )

        p = sub.add_parser("show", help="One job's fields and its journal.")
        p.add_argument("job_id", type=parse_job_id, metavar="ID")

        for verb, what in (
            ("cancel", "Cancel pending jobs; ask workers to stop claimed ones."),
            ("requeue", "Send dead or cancelled jobs back to pending."),
        ):
            subparsers.bulk_arguments(
                sub.add_parser(
                    verb,
                    help=f"{what} By id, or every job the filters match (a count "
                    "first; --yes to act).",
                ),
                statuses=bulk.STATUSES[verb],
                default=bulk.DEFAULT_STATUSES[verb],
                force=verb == "requeue",
            )
        self._add_operations(sub)

    @staticmethod
    def _add_operations(sub: Any) -> None:
        """The queue-wide operations and reads, apart from the per-job ones above."""
        subparsers.cleanup_arguments(
            sub.add_parser("cleanup", help="Delete finished jobs (and journals).")
        )
        for verb, what in (
            ("pause", "Stop workers claiming from these queues (enqueue goes on)."),
            ("resume", "Let workers claim from these paused queues again."),
        ):
            sub.add_parser(verb, help=what).add_argument(
                "queues", nargs="+", type=queue_name, metavar="QUEUE"
            )
        subparsers.limit_arguments(
            sub.add_parser(
                "limit",
                help="Show the global limits per kind, or set or clear a kind's at run time.",
            )
        )
        sub.add_parser(
            "schedules", help="Periodic schedules: their next run, last tick and its job."
        )
        workflows.list_arguments(
            sub.add_parser("workflows", help="List workflows, newest first, with their progress.")
        )
        workflows.show_arguments(
            sub.add_parser("workflow", help="One workflow: its steps, their status and parents.")
        )
        steps.arguments(sub.add_parser("steps", help="Jobs whose durable steps diverged."))
        rerun.arguments(sub.add_parser("rerun", help="Re-run a job from a recorded step."))
        subparsers.health_arguments(
            sub.add_parser(
                "health",
                help="Exit 0 if a worker's heartbeat is fresh (and, with --max-pending-age, no "
                "due job has waited longer); else exit 1 with the reason on one line (for "
                "container health checks); exit 3 if workers are alive but runnable jobs "
                "are of kinds no live worker runs.",
            )
        )

    def execute(self, *args: Any, **options: Any) -> str | None:
        if options.get("subcommand") == "health":
            # A health check's stderr is its one-line reason: the system checks' warnings
            # (``manage.py check`` reports them) would bury it, and cost it time.
            options["skip_checks"] = True
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conf.get()
        except ConfigurationError as exc:
            raise CommandError(str(exc)) from exc
        handler: Callable[[dict[str, Any]], None] = getattr(self, f"do_{options['subcommand']}")
        handler(options)

    # --- stats ----------------------------------------------------------------------------

    def do_stats(self, options: dict[str, Any]) -> None:
        if options["key"] is not None:
            rows = [
                [k.kind, k.pending, k.in_flight, k.oldest or "-"]
                for k in store.key_loads(key=options["key"])
            ]
            for line in table(["KIND", "PENDING", "IN FLIGHT", "OLDEST PENDING"], rows, indent=""):
                self.stdout.write(line)
            return
        snapshot = store.stats(window=options["window"])
        if options["json"]:
            self.stdout.write(json.dumps(snapshot.to_dict(), default=json_default, indent=2))
            return
        for line in render_stats(snapshot):
            self.stdout.write(line)

    # --- workflows ------------------------------------------------------------------------

    def do_workflows(self, options: dict[str, Any]) -> None:
        workflows.do_list(options, self.stdout.write)

    def do_workflow(self, options: dict[str, Any]) -> None:
        workflows.do_show(options, self.stdout.write)

    # --- schedules ------------------------------------------------------------------------

    def do_schedules(self, options: dict[str, Any]) -> None:
        try:
            rows = schedule_overview()
        except JobQueueError as exc:
            raise CommandError(str(exc)) from exc
        if not rows:
            self.stdout.write("No periodic schedules.")
            return
        headers = ["NAME", "KIND", "CRON", "TIMEZONE", "NEXT RUN", "LAST TICK", "LAST JOB"]
        body = [
            [
                r.name,
                r.kind,
                r.cron + (" (catch up)" if r.catch_up else ""),
                r.timezone,
                fmt_time(r.next_run),
                fmt_time(r.last_tick),
                f"{r.last_job_id} ({r.last_job_status})" if r.last_job_id else "-",
            ]
            for r in rows
        ]
        for line in table(headers, body, indent=""):
            self.stdout.write(line)

    # --- health ---------------------------------------------------------------------------

    def do_health(self, options: dict[str, Any]) -> None:
        """Exit 0 healthy; 1 unhealthy (no fresh heartbeat, a due job waiting too long, the
        database unreadable): restart or page; ``UNSERVED_EXIT`` when workers are fine but
        runnable jobs wait for a kind none of them runs: a restart would not help."""
        now = timezone.now()
        max_beat: timedelta = options["max_heartbeat_age"]
        max_pending: timedelta | None = options["max_pending_age"]
        try:
            beat = store.freshest_heartbeat()
            due = store.oldest_due(now=now) if max_pending is not None else None
        except DatabaseError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise CommandError(f"unhealthy: the jobs database cannot be read: {first}") from exc
        problems = []
        if beat is None:
            problems.append("no running worker has a heartbeat")
        elif now - beat > max_beat:
            problems.append(
                f"no worker heartbeat within {fmt_age(max_beat.total_seconds())} "
                f"(the freshest is {fmt_age((now - beat).total_seconds())} old)"
            )
        if max_pending is not None and due is not None and now - due > max_pending:
            problems.append(
                f"the oldest due pending job has waited {fmt_age((now - due).total_seconds())}"
                f", over {fmt_age(max_pending.total_seconds())}"
            )
        if problems:
            raise CommandError(f"unhealthy: {'; '.join(problems)}")
        unserved = store.unserved_kinds(now=now)
        if unserved:
            shown = ", ".join(f"{kind} ({count})" for kind, count in unserved.items())
            raise CommandError(
                f"unserved: runnable jobs of kind(s) no live worker runs: {shown}",
                returncode=UNSERVED_EXIT,
            )
        waited = (
            "" if due is None else f"; oldest due job waited {fmt_age((now - due).total_seconds())}"
        )
        assert beat is not None
        self.stdout.write(
            f"healthy: worker heartbeat {fmt_age((now - beat).total_seconds())} ago{waited}"
        )

    # --- pause / resume -------------------------------------------------------------------

    def do_pause(self, options: dict[str, Any]) -> None:
        self._queues(options["queues"], "pause")

    def do_resume(self, options: dict[str, Any]) -> None:
        self._queues(options["queues"], "resume")

    def _queues(self, names: list[str], verb: str) -> None:
        for name in names:
            try:
                if verb == "pause":
                    changed = store.pause_queue(queue=name, actor=operator())
                else:
                    changed = store.resume_queue(queue=name)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"{name}: {verb}d" if changed else f"{name}: already {verb}d")

    # --- limit ----------------------------------------------------------------------------

    def do_limit(self, options: dict[str, Any]) -> None:
        kind = options["kind"]
        given = {n: options[n] for n in ("max_in_flight", "rate_limit", *limiting.PER_KEY)}
        given = {n: v for n, v in given.items() if v is not limiting.UNCHANGED}
        changing = bool(given)
        if kind is None:
            if changing or options["clear"]:
                raise CommandError("limit: name the KIND to set or clear limits for")
            self._show_limits(limiting.limits(max_age=0))
            return
        if options["clear"] and changing:
            raise CommandError("limit: give --clear alone, or --max-in-flight/--rate-limit")
        if not options["clear"] and kind not in registry:
            known = ", ".join(registry.kinds()) or "none"
            raise CommandError(f"limit: no task is registered under kind {kind!r}; known: {known}")
        try:
            if options["clear"]:
                cleared = limiting.clear_limit(kind)
                self.stdout.write(
                    f"{kind}: run-time limits cleared" if cleared else f"{kind}: none were set"
                )
            elif changing:
                limiting.set_limit(kind, actor=operator(), **given)
        except InvalidLimit as exc:
            raise CommandError(f"limit: {exc}") from exc
        self._show_limits([limiting.resolve(kind, max_age=0)])

    def _show_limits(self, limits: Sequence[limiting.KindLimits]) -> None:
        if not limits:
            self.stdout.write("No kind is limited.")
            return
        claimed = store.in_flight(kinds=[k.kind for k in limits])
        rows = [
            [
                k.kind,
                "-" if k.max_in_flight is None else str(k.max_in_flight),
                k.max_in_flight_from or "-",
                claimed.get(k.kind, 0),
                "-" if k.rate_limit is None else str(k.rate_limit),
                k.rate_limit_from or "-",
                k.per_key_summary() or "-",
            ]
            for k in limits
        ]
        headers = [
            "KIND",
            "MAX IN FLIGHT",
            "SET BY",
            "IN FLIGHT",
            "RATE LIMIT",
            "SET BY",
            "PER KEY",
        ]
        for line in table(headers, rows, indent=""):
            self.stdout.write(line)

    # --- list -----------------------------------------------------------------------------

    def do_list(self, options: dict[str, Any]) -> None:
        try:
            page = store.history(
                kind=options["kind"] or None,
                queue=options["queue"],
                status=options["status"] or None,
                created_after=options["created_after"],
                created_before=options["created_before"],
                finished_after=options["finished_after"],
                finished_before=options["finished_before"],
                after=options["after"],
                limit=options["limit"],
                newest_first=options["newest_first"],
            )
        except ValueError as exc:
            name = "--after" if options["after"] and "cursor" in str(exc) else "list"
            raise CommandError(f"{name}: {exc}") from exc
        if options["json"]:
            self.stdout.write(bulk.page_json(page))
            return
        if options["ids"]:
            for job in page.jobs:
                self.stdout.write(str(job.id))
            if page.next_cursor:
                self.stderr.write(f"next: --after '{page.next_cursor}'")
            return
        rows = [
            [
                str(job.id),
                job.kind,
                job.queue,
                job.status,
                job.get_priority_display(),
                job.run_count,
                job.failure_count,
                fmt_time(job.created_at),
                fmt_time(job.finished_at),
            ]
            for job in page.jobs
        ]
        if rows:
            headers = [
                "ID",
                "KIND",
                "QUEUE",
                "STATUS",
                "PRIORITY",
                "RUNS",
                "FAILURES",
                "CREATED",
                "FINISHED",
            ]
            for line in table(headers, rows, indent=""):
                self.stdout.write(line)
        else:
            self.stdout.write("No jobs match.")
        if page.next_cursor:
            self.stdout.write(f"next: --after '{page.next_cursor}'")
        else:
            self.stdout.write("next: (end)")

    # --- show -----------------------------------------------------------------------------

    def do_steps(self, options: dict[str, Any]) -> None:
        steps.run(self, options)

    def do_rerun(self, options: dict[str, Any]) -> None:
        rerun.run(self, {**options, "actor": operator()})

    def do_show(self, options: dict[str, Any]) -> None:
        show.do_show(options, self.stdout.write)

    # --- cancel / requeue -----------------------------------------------------------------

    def do_cancel(self, options: dict[str, Any]) -> None:
        actor = operator()
        if bulk.run("cancel", options, partial(store.cancel, actor=actor), self):
            return

        def act(job_id: uuid.UUID) -> str:
            job = store.cancel(job_id=job_id, actor=actor)
            if job.status == Status.CLAIMED:
                return f"{job.id}: cancel requested; it stops when its running worker sees it"
            return f"{job.id}: cancelled"

        self._each(options["job_ids"], act, verb="cancel")

    def do_requeue(self, options: dict[str, Any]) -> None:
        actor = operator()
        requeue = partial(store.requeue, force=options["force"], actor=actor)
        if bulk.run("requeue", options, requeue, self):
            return

        def act(job_id: uuid.UUID) -> str:
            job = requeue(job_id=job_id)
            return f"{job.id}: requeued (pending now)"

        self._each(options["job_ids"], act, verb="requeue")

    def _each(
        self, job_ids: Sequence[uuid.UUID], act: Callable[[uuid.UUID], str], verb: str
    ) -> None:
        """Act on every id; report each failure and exit non-zero if there was any."""
        failed: list[str] = []
        for job_id in job_ids:
            try:
                message = act(job_id)
            except JobNotFound:
                failed.append(str(job_id))
                self.stderr.write(f"{job_id}: no such job")
            except InvalidTransition as exc:
                failed.append(str(job_id))
                self.stderr.write(f"{job_id}: {exc}")
            else:
                self.stdout.write(message)
        if failed:
            raise CommandError(
                f"could not {verb} {len(failed)} of {len(job_ids)} job(s): {', '.join(failed)}"
            )

    # --- cleanup --------------------------------------------------------------------------

    def do_cleanup(self, options: dict[str, Any]) -> None:
        older_than: timedelta = options["older_than"]
        cutoff = timezone.now() - older_than
        try:
            count = store.cleanup(
                finished_before=cutoff,
                kind=options["kind"],
                status=options["status"],
                dry_run=options["dry_run"],
            )
        except ValueError as exc:
            raise CommandError(f"cleanup: {exc}") from exc
        what = "".join(f"{word} " for word in (options["status"], options["kind"]) if word)
        done = "would be deleted (dry run)" if options["dry_run"] else "deleted"
        self.stdout.write(f"{count} {what}job(s) finished before {fmt_time(cutoff)} {done}")
