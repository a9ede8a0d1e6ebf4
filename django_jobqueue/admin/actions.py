"""The operator actions (requeue, cancel, terminate, run now, delete), bulk and on one job.

Each action is a row of ``ACTIONS``: its permission, the storage layer's rule for which
jobs it applies to (``store.*_refusal``) and the storage operation that does it. The
admin holds no rule of its own: it shows a confirmation page with how many jobs the
action will change and how many it skips (and why), then calls the operation on the
ids (a batch at a time, set-based, in the store) and records each change of selected
rows in a Django ``LogEntry`` (the journal entry is the store's; a whole filter's
changes are logged a batch to an entry, see ``whole_filter``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.admin import whole_filter
from django_jobqueue.admin.common import JobPages, actor
from django_jobqueue.models import Job
from django_jobqueue.store import sql

if TYPE_CHECKING:
    from django.contrib.admin.models import LogEntry

# A bulk action changes at most this many jobs; past it, narrow the filter (or, to
# delete finished jobs by age, use the clean-up form, which works in batches).
MAX_SELECTED = 1000


class ActingAdmin(JobPages, Protocol):
    """What the actions use of the jobs' ModelAdmin (``ActingAdmin``, which imports this
    module for its actions: typing them against it would be a circle)."""

    model: type[Job]

    def has_action_permission(self, request: HttpRequest, action: JobAction) -> bool: ...

    def log_change(self, request: HttpRequest, obj: Job, message: Any) -> LogEntry: ...

    def log_deletions(self, request: HttpRequest, queryset: QuerySet[Job]) -> list[LogEntry]: ...


@dataclass(frozen=True)
class JobAction:
    name: str
    verb: str
    done: str
    permission: str  # the codename; ModelAdmin.has_<perm>_permission checks it
    refusal: Callable[[Job, bool], str | None]
    perform: Callable[[Sequence[uuid.UUID], str, bool], list[uuid.UUID]]  # the ids changed
    explain: str
    rule: str  # the name of the same rule as a filter (``store.acts_on``)

    def acts_on(self, *, force: bool) -> Q:
        """The jobs this action may change, as a filter (the refusal's rule)."""
        return store.acts_on(self.rule, force=force, now=timezone.now())


def _requeue(ids: Sequence[uuid.UUID], who: str, force: bool) -> list[uuid.UUID]:
    return store.requeue_many(job_ids=ids, force=force, actor=who)


def _delete(ids: Sequence[uuid.UUID], who: str, force: bool) -> list[uuid.UUID]:
    return store.delete_finished(job_ids=ids)


ACTIONS: dict[str, JobAction] = {
    a.name: a
    for a in (
        JobAction(
            "requeue",
            "Requeue",
            "Requeued",
            "requeue_job",
            lambda job, force: store.requeue_refusal(job, force=force),
            _requeue,
            "Dead and cancelled jobs go back to pending, runnable now, with their failure "
            "count reset.",
            "requeue",
        ),
        JobAction(
            "cancel",
            "Cancel",
            "Cancelled",
            "cancel_job",
            lambda job, force: store.cancel_refusal(job),
            lambda ids, who, force: store.cancel_many(job_ids=ids, actor=who),
            "Pending jobs are cancelled at once. A claimed job's worker is asked to stop it: "
            "a cooperative job stops at its next check, and the job ends cancelled.",
            "cancel",
        ),
        JobAction(
            "terminate",
            "Terminate",
            "Terminated",
            "cancel_job",
            lambda job, force: store.terminate_refusal(job),
            lambda ids, who, force: store.terminate_many(job_ids=ids, actor=who),
            "Pending jobs are cancelled at once. A claimed job is stopped now, not at its next "
            "check: within a second its worker kills the run's process-pool child (or "
            "cancels its coroutine, or abandons its thread) and the job ends cancelled, the "
            "journal naming you and the means.",
            "terminate",
        ),
        JobAction(
            "run_now",
            "Run now",
            "Made runnable now",
            "run_job_now",
            lambda job, force: store.run_now_refusal(job, now=timezone.now()),
            lambda ids, who, force: store.run_now_many(job_ids=ids, actor=who),
            "Pending jobs scheduled for later (a delay, a backoff or a pause) become "
            "runnable at once; the next free worker takes them.",
            "run_now",
        ),
        JobAction(
            "delete_selected",
            "Delete",
            "Deleted",
            "delete_job",
            lambda job, force: store.delete_refusal(job),
            _delete,
            "Finished jobs and their journal are deleted for good. Pending and claimed jobs "
            "are never deleted.",
            "delete",
        ),
    )
}


def bulk(
    action: JobAction,
) -> Callable[[ActingAdmin, HttpRequest, QuerySet[Job]], HttpResponse | None]:
    """The changelist action for ``action``: a confirmation page first, then the change."""

    def run(
        modeladmin: ActingAdmin, request: HttpRequest, queryset: QuerySet[Job]
    ) -> HttpResponse | None:
        if across(request):
            return whole_filter.confirm_or_apply(modeladmin, request, action, queryset)
        jobs = list(queryset.order_by("-id")[: MAX_SELECTED + 1])  # newest first
        if len(jobs) > MAX_SELECTED:
            messages.error(
                request,
                f"{action.verb} works on at most {MAX_SELECTED} selected jobs at once: "
                'select every job matching the filter instead ("Select all"), or narrow '
                "it (to delete old finished jobs, use Clean up).",
            )
            return None
        return confirm_or_apply(modeladmin, request, action, jobs, changelist=True)

    run.__name__ = action.name
    # "Run selected jobs now", not "Run now selected jobs": a verb's particle goes last.
    verb, _, particle = action.verb.partition(" ")
    label = f"{verb} selected jobs {particle}".strip()
    run.short_description = label  # type: ignore[attr-defined]
    # ActingAdmin.has_<name>_permission (Django's own has_delete_permission for delete).
    allowed = "delete" if action.name == "delete_selected" else action.name
    run.allowed_permissions = (allowed,)  # type: ignore[attr-defined]
    return run


def across(request: HttpRequest) -> bool:
    """Whether the action was asked for every job matching the filter (the changelist's
    "Select all N"), as Django's action form reads its ``select_across`` field."""
    return request.POST.get("select_across", "").lower() not in ("", "0", "false")


def confirm_or_apply(
    modeladmin: ActingAdmin,
    request: HttpRequest,
    action: JobAction,
    jobs: list[Job],
    *,
    changelist: bool,
) -> HttpResponse | None:
    """The confirmation page for ``action`` on ``jobs``, or, when it was confirmed
    (``post=yes``), the change itself and a message saying what it did."""
    if not modeladmin.has_action_permission(request, action):
        raise PermissionDenied
    force = action.name == "requeue" and request.POST.get("force") == "on"
    if request.method == "POST" and request.POST.get("post") == "yes":
        apply(modeladmin, request, action, jobs, force=force)
        return None if changelist else HttpResponseRedirect(request.path.rsplit("act/", 1)[0])
    return TemplateResponse(
        request,
        "django_jobqueue/admin/confirm_action.html",
        {
            **modeladmin.admin_site.each_context(request),
            **plan(action, jobs),
            "title": f"{action.verb}: are you sure?",
            "action": action,
            "jobs": jobs,
            "changelist": changelist,
            "opts": modeladmin.model._meta,
            "media": modeladmin.media,
        },
    )


def plan(action: JobAction, jobs: list[Job]) -> dict[str, Any]:
    """How many of ``jobs`` the action changes, how many it skips and why (by status)."""
    changes = [j for j in jobs if action.refusal(j, False) is None]
    skipped = [j for j in jobs if action.refusal(j, False) is not None]
    forceable = (
        [j for j in skipped if action.refusal(j, True) is None] if action.name == "requeue" else []
    )
    reasons = Counter(j.status for j in skipped if j not in forceable)
    return {
        "changes": changes,
        "forceable": forceable,
        "skip_reasons": sorted(reasons.items()),
        "n_changes": len(changes),
        "n_skipped": len(skipped),
        "n_forceable": len(forceable),
    }


def apply(
    modeladmin: ActingAdmin,
    request: HttpRequest,
    action: JobAction,
    jobs: list[Job],
    *,
    force: bool,
) -> None:
    wanted = [j.id for j in jobs if action.refusal(j, force) is None]
    who = actor(request)
    if action.name == "delete_selected":
        # Logged before they go, as Django's own delete does.
        modeladmin.log_deletions(request, sql.jobs().filter(id__in=wanted))
    done = set(action.perform(wanted, who, force))
    if action.name != "delete_selected":
        note = f"{action.done} by {who}" + (" (force)" if force else "")
        for job in jobs:
            if job.id in done:
                modeladmin.log_change(request, job, note)
    skipped = len(jobs) - len(done)
    text = f"{action.done} {len(done)} job{'s' if len(done) != 1 else ''}."
    if skipped:
        text += f" Skipped {skipped}: their state does not allow it."
    messages.add_message(request, messages.SUCCESS if done else messages.WARNING, text)
