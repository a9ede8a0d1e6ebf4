"""An operator action on every job a changelist's filter matches (Django's "Select all
N"), not only the rows of one page.

The confirmation counts what matches in the database (how many the action changes,
how many it skips and, by status, why) without reading the jobs; the change then runs
a batch of ids at a time through the action's own store operation, so each job is
locked, checked and journalled as when it is picked by hand, and no transaction
outlives a batch. Each batch is one admin log entry naming its count and the filter.
Bounded (``MAX_MATCHING``) and permission-checked like the
selected-rows form in ``actions``, which imports this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from django.contrib import messages
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from django_jobqueue.admin.common import JobPages, actor
from django_jobqueue.models import Job
from django_jobqueue.store import sql

if TYPE_CHECKING:
    from django.forms import Media

# A filter-wide action changes at most this many jobs; past it, narrow the filter (or
# use ``manage.py jobqueue requeue|cancel`` with filters, which has no bound).
MAX_MATCHING = 100_000
# Ids read and acted on per batch (the store's operations lock, update and journal a
# batch in a few statements: 100,000 jobs are 100 batches, seconds, not minutes).
BATCH = 1000
# The confirmation lists this many of the jobs it will change.
SAMPLE = 50


class FilterAction(Protocol):
    """What this module uses of an ``actions.JobAction``."""

    @property
    def name(self) -> str: ...
    @property
    def verb(self) -> str: ...
    @property
    def done(self) -> str: ...
    @property
    def perform(self) -> Callable[[Sequence[uuid.UUID], str, bool], list[uuid.UUID]]: ...

    def acts_on(self, *, force: bool) -> Q: ...


class FilterAdmin(JobPages, Protocol):
    """What this module uses of the jobs' ModelAdmin."""

    model: type[Job]

    @property
    def media(self) -> Media: ...

    def has_action_permission(self, request: HttpRequest, action: Any) -> bool: ...

    def log_deletions(self, request: HttpRequest, queryset: QuerySet[Job]) -> list[LogEntry]: ...


def confirm_or_apply(
    modeladmin: FilterAdmin, request: HttpRequest, action: FilterAction, queryset: QuerySet[Job]
) -> HttpResponse | None:
    """The confirmation of ``action`` on every job of ``queryset`` (the changelist's
    filtered jobs), or, once confirmed, the change and a message saying what it did."""
    if not modeladmin.has_action_permission(request, action):
        raise PermissionDenied
    # The ids only: the changelist's queryset carries per-row subqueries (last run,
    # last error) that a count must not compute.
    matching = sql.jobs().filter(pk__in=queryset.order_by().values("pk"))
    total = matching.values("pk")[: MAX_MATCHING + 1].count()
    if total > MAX_MATCHING:
        messages.error(
            request,
            f"{action.verb} works on at most {MAX_MATCHING:,} jobs matching a filter, and "
            f"more match this one: narrow it, or use manage.py jobqueue with filters.",
        )
        return None
    force = action.name == "requeue" and request.POST.get("force") == "on"
    if request.method == "POST" and request.POST.get("post") == "yes":
        apply(modeladmin, request, action, matching, force=force)
        return None
    return TemplateResponse(
        request,
        "django_jobqueue/admin/confirm_action.html",
        {
            **modeladmin.admin_site.each_context(request),
            **plan(action, matching, total),
            "title": f"{action.verb}: are you sure?",
            "action": action,
            "changelist": True,
            "across": True,
            "batch": BATCH,
            "back": request.get_full_path(),
            "opts": modeladmin.model._meta,
            "media": modeladmin.media,
        },
    )


def plan(action: FilterAction, matching: QuerySet[Job], total: int) -> dict[str, Any]:
    """How many of the ``total`` matching jobs the action changes, how many only with
    force, how many it skips by status; and the first ``SAMPLE`` it changes."""
    changes = matching.filter(action.acts_on(force=False))
    n_changes = changes.count()
    n_forceable = 0
    if action.name == "requeue":
        n_forceable = matching.filter(action.acts_on(force=True)).count() - n_changes
    refused = action.acts_on(force=action.name == "requeue")
    reasons = (
        matching.exclude(refused).values_list("status").annotate(n=Count("id")).order_by("status")
    )
    sample = list(changes.order_by("id").only("id", "kind", "status")[:SAMPLE])
    first = sample[0].pk if sample else matching.values_list("pk", flat=True).first()
    return {
        "n_matching": total,
        "n_changes": n_changes,
        "n_forceable": n_forceable,
        "n_skipped": total - n_changes,
        "skip_reasons": list(reasons),
        "changes": sample,
        "first_id": first,
    }


def apply(
    modeladmin: FilterAdmin,
    request: HttpRequest,
    action: FilterAction,
    matching: QuerySet[Job],
    *,
    force: bool,
) -> None:
    """The change, a batch of ids at a time (keyset by id: a job the action moved out of
    the filter, or into it, is not met twice), each batch one set-based store operation
    and one admin log entry naming its count and the filter; then a message of how many
    were done and how many refused, and why."""
    who = actor(request)
    refused = dict(
        matching.exclude(action.acts_on(force=force))
        .values_list("status")
        .annotate(n=Count("id"))
        .order_by("status")
        .values_list("status", "n")
    )
    wanted = matching.filter(action.acts_on(force=force)).order_by("id")
    done = tried = 0
    last: uuid.UUID | None = None
    while tried < MAX_MATCHING:
        page = wanted if last is None else wanted.filter(id__gt=last)
        ids = list(page.values_list("id", flat=True)[: min(BATCH, MAX_MATCHING - tried)])
        if not ids:
            break
        last, tried = ids[-1], tried + len(ids)
        changed = action.perform(ids, who, force)
        done += len(changed)
        if changed:
            log_batch(request, action, len(changed), force=force)
    messages.add_message(
        request,
        messages.SUCCESS if done else messages.WARNING,
        outcome(action, done, tried, refused),
    )


def described_filter(request: HttpRequest) -> str:
    """The changelist's filter as its query string (without paging and ordering)."""
    params = request.GET.copy()
    for name in ("p", "o", "e", "_changelist_filters"):
        params.pop(name, None)
    return params.urlencode() or "every job"


def log_batch(request: HttpRequest, action: FilterAction, count: int, *, force: bool) -> None:
    """One admin log entry for a batch: the action, how many jobs and the filter (an
    entry per job made a 100,000-job action 100,000 inserts)."""
    flag = DELETION if action.name == "delete_selected" else CHANGE
    what = f"{action.done} {count:,} jobs matching {described_filter(request)}"
    LogEntry.objects.create(
        user_id=cast(int, request.user.pk),
        content_type=ContentType.objects.get_for_model(Job),
        object_id="",
        object_repr=what[:200],
        action_flag=flag,
        change_message=f"{what} by {actor(request)}" + (" (force)" if force else ""),
    )


def outcome(action: FilterAction, done: int, tried: int, refused: dict[str, int]) -> str:
    """What the action came to: done, refused by status, refused at their turn."""
    text = f"{action.done} {done:,} job{'s' if done != 1 else ''} matching the filter."
    if refused:
        why = ", ".join(f"{n:,} {status}" for status, n in refused.items())
        text += f" Refused {sum(refused.values()):,}: their state does not allow it ({why})."
    if tried > done:
        text += (
            f" Skipped {tried - done:,}: refused when their turn came (a state changed "
            "since the count, or an idempotency key another active job holds)."
        )
    return text
