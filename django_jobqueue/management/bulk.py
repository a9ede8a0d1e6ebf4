"""How ``jobqueue cancel`` and ``requeue`` select jobs: by id, each reported on its
own; or by filter, a count first (nothing done without ``--yes``), then the matching
jobs a page at a time. Either way each job goes through the store's own ``cancel`` or
``requeue``, so every job is locked, checked and journalled exactly as when it is
named by id.
"""

from __future__ import annotations

import difflib
import uuid
from argparse import ArgumentParser
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.errors import InvalidTransition, JobNotFound
from django_jobqueue.formatting import fmt_age
from django_jobqueue.management.arguments import kind_name, parse_duration, parse_job_id, queue_name
from django_jobqueue.models import Job, Status
from django_jobqueue.task.registry import registry

# Jobs read per page while acting: each is then settled in a transaction of its own
# (the store's cancel or requeue), so no lock is held across a page.
BATCH = 500

# Which statuses each verb may select, and what it selects without --status.
STATUSES = {
    "cancel": (Status.PENDING, Status.CLAIMED),
    "requeue": (Status.DEAD, Status.CANCELLED, Status.COMPLETED),
}
DEFAULT_STATUSES = {"cancel": [Status.PENDING], "requeue": [Status.DEAD]}
FILTERS = ("kind", "status", "queue", "older_than")
PAST = {"cancel": "cancelled", "requeue": "requeued"}


def has_filter(options: dict[str, Any]) -> bool:
    return any(options.get(name) for name in FILTERS)


def filters_of(verb: str, options: dict[str, Any]) -> dict[str, Any]:
    """The ``store.history`` filters of a bulk command line, checked: a status the verb
    cannot act on is refused before anything is read."""
    statuses = options["status"] or DEFAULT_STATUSES[verb]
    wrong = [s for s in statuses if s not in STATUSES[verb]]
    if wrong:
        raise CommandError(
            f"{verb}: --status {', '.join(wrong)}: only {', '.join(STATUSES[verb])} jobs "
            f"can be {PAST[verb]}; nothing was done"
        )
    if verb == "requeue" and Status.COMPLETED in statuses and not options["force"]:
        raise CommandError(
            "requeue: --status completed runs those jobs again: add --force to mean it; "
            "nothing was done"
        )
    older: timedelta | None = options["older_than"]
    return {
        "kind": options["kind"] or None,
        "status": list(statuses),
        "queue": options["queue"],
        "created_before": timezone.now() - older if older else None,
    }


def describe(filters: dict[str, Any], older: timedelta | None) -> str:
    """The filters in words, for the count line."""
    parts = [f"status {'/'.join(filters['status'])}"]
    if filters["kind"]:
        parts.append(f"kind {', '.join(filters['kind'])}")
    if filters["queue"]:
        parts.append(f"queue {filters['queue']}")
    if older:
        parts.append(f"created over {fmt_age(older.total_seconds())} ago")
    return ", ".join(parts)


def unknown_kind_hint(kinds: list[str] | None) -> str:
    """For a filter that matched nothing: "did you mean" for a kind no task has."""
    hints = []
    for kind in kinds or []:
        if kind in registry:
            continue
        near = difflib.get_close_matches(kind, registry.kinds(), n=1)
        if near:
            hints.append(f"no task has kind {kind!r}: did you mean {near[0]!r}?")
    return "; ".join(hints)


@dataclass
class Outcome:
    """What a bulk run came to: jobs acted on, and those refused (with why)."""

    done: int = 0
    stopping: int = 0  # claimed jobs asked to stop (cancel)
    refused: list[str] = field(default_factory=list)


def matching(filters: dict[str, Any]) -> Iterator[uuid.UUID]:
    """The ids of the matching jobs, oldest first, a keyset page at a time: a job that
    changes status as it is acted on is neither seen again nor makes one skipped."""
    cursor = None
    while True:
        page = store.history(**filters, after=cursor, limit=BATCH)
        yield from (job.id for job in page.jobs)
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def act_on_all(filters: dict[str, Any], act: Callable[[uuid.UUID], Job]) -> Outcome:
    outcome = Outcome()
    for job_id in matching(filters):
        try:
            job = act(job_id)
        except (InvalidTransition, JobNotFound) as exc:  # changed since it was read
            outcome.refused.append(f"{job_id}: {exc}")
            continue
        outcome.done += 1
        outcome.stopping += job.status == Status.CLAIMED
    return outcome


def run(verb: str, options: dict[str, Any], act: Callable[..., Job], command: BaseCommand) -> bool:
    """By filter, if filters were given (False: by id): count what matches and stop
    there unless ``--yes``; then act on each, a page at a time."""
    if not has_filter(options):
        if not options["job_ids"]:
            raise CommandError(
                f"{verb}: give job ids, or filters (--kind, --status, --queue, "
                "--older-than) to select jobs"
            )
        if options["yes"]:
            raise CommandError(f"{verb}: --yes goes with filters; ids are acted on at once")
        return False
    if options["job_ids"]:
        raise CommandError(f"{verb}: give job ids or filters, not both")
    filters = filters_of(verb, options)
    what = describe(filters, options["older_than"])
    count = store.history_count(**filters)
    if not options["yes"]:
        hint = unknown_kind_hint(filters["kind"]) if not count else ""
        command.stdout.write(
            f"{count} job(s) match ({what}); nothing was done (dry run): add --yes to "
            f"{verb} them" + (f" ({hint})" if hint else "")
        )
        return True
    done = act_on_all(filters, lambda job_id: act(job_id=job_id))
    stopping = f", {done.stopping} of them running: asked to stop" if done.stopping else ""
    command.stdout.write(f"{PAST[verb]} {done.done} job(s) ({what}){stopping}")
    for line in done.refused:
        command.stderr.write(line)
    if done.refused:
        raise CommandError(
            f"could not {verb} {len(done.refused)} job(s) that changed since they matched"
        )
    return True


def arguments(p: ArgumentParser, *, verb: str, force: bool = False) -> None:
    """Ids, or the filters that select jobs in bulk (the statuses ``verb`` may select)."""
    p.add_argument("job_ids", type=parse_job_id, nargs="*", metavar="ID")
    if force:
        p.add_argument(
            "--force", action="store_true", help="Also requeue completed jobs (runs them again)."
        )
    p.add_argument(
        "--kind", action="append", type=kind_name, default=[], help="Only this kind (repeatable)."
    )
    p.add_argument(
        "--status",
        action="append",
        default=[],
        choices=list(STATUSES[verb]),
        help=f"Only this status (repeatable; default {', '.join(DEFAULT_STATUSES[verb])}).",
    )
    p.add_argument("--queue", type=queue_name, help="Only this queue.")
    p.add_argument(
        "--older-than",
        type=parse_duration,
        metavar="AGE",
        help="Only jobs created more than AGE ago (7d, 12h, 30m).",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="Act on every job the filters match (without it: only count them).",
    )


def each(
    command: BaseCommand,
    job_ids: Sequence[uuid.UUID],
    act: Callable[[uuid.UUID], str],
    verb: str,
) -> None:
    """Act on every id; report each failure and exit non-zero if there was any."""
    failed: list[str] = []
    for job_id in job_ids:
        try:
            message = act(job_id)
        except JobNotFound:
            failed.append(str(job_id))
            command.stderr.write(f"{job_id}: no such job")
        except InvalidTransition as exc:
            failed.append(str(job_id))
            command.stderr.write(f"{job_id}: {exc}")
        else:
            command.stdout.write(message)
    if failed:
        raise CommandError(
            f"could not {verb} {len(failed)} of {len(job_ids)} job(s): {', '.join(failed)}"
        )
