"""The workflow list's bulk actions: cancel the selected workflows, retry their dead
steps. Each is the single-workflow action of ``workflow_actions`` (its refusal, its
store operation, which journals every step it changes with the operator as actor)
applied to every selected workflow it applies to, behind a confirmation page that
counts what will change and what will be skipped, and why; each workflow changed gets
its ``LogEntry``. Its permission is checked on both requests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from django_jobqueue.admin.common import actor
from django_jobqueue.admin.workflow_actions import ACTIONS, WorkflowAction, WorkflowPages
from django_jobqueue.errors import InvalidTransition, WorkflowNotFound
from django_jobqueue.models import Workflow

if TYPE_CHECKING:
    Action = Callable[[Any, HttpRequest, QuerySet[Workflow]], HttpResponse | None]

# The most workflows one confirmation lists by name.
LISTED = 50


def _perform(
    modeladmin: WorkflowPages,
    request: HttpRequest,
    action: WorkflowAction,
    chosen: list[Workflow],
    selected: int,
) -> None:
    """Apply ``action`` to each of ``chosen`` (of ``selected``); the message counts what
    changed and what was skipped (refused on the page, or changed since)."""
    who = actor(request)
    done, failed = 0, []
    for wf in chosen:
        try:
            action.perform(wf, who)
        except (InvalidTransition, WorkflowNotFound) as exc:  # changed since the page
            failed.append(f"{wf.name}: {exc}")
            continue
        modeladmin.log_change(request, wf, f"{action.verb} by {who}")
        done += 1
    text = f"{action.verb}: {done} workflow{'s' if done != 1 else ''}."
    skipped = selected - done
    messages.success(request, text + (f" Skipped {skipped}." if skipped else ""))
    for line in failed[:LISTED]:
        messages.warning(request, line)


def bulk(name: str) -> Action:
    """The changelist action of the workflow action ``name``."""
    action = ACTIONS[name]

    def run(
        modeladmin: WorkflowPages, request: HttpRequest, queryset: QuerySet[Workflow]
    ) -> HttpResponse | None:
        if not request.user.has_perm(action.permission):
            raise PermissionDenied
        selected = list(queryset.order_by("-created_at", "-id"))
        refusals = {wf.id: action.refusal(wf) for wf in selected}
        chosen = [wf for wf in selected if refusals[wf.id] is None]
        if request.POST.get("post") == "yes":
            _perform(modeladmin, request, action, chosen, len(selected))
            return None  # back to the list, its message shown
        skipped = Counter(r for r in refusals.values() if r is not None)
        context: dict[str, Any] = {
            **modeladmin.admin_site.each_context(request),
            "title": f"{action.verb}: are you sure?",
            "opts": modeladmin.opts,
            "action": action,
            "action_name": f"bulk_{name}",
            "chosen": chosen[:LISTED],
            "n_chosen": len(chosen),
            "n_more": max(len(chosen) - LISTED, 0),
            "skipped": sorted(skipped.items()),
            "n_skipped": len(selected) - len(chosen),
            # the ids to post back; with select_across the filter says which, and one id
            # is posted only because Django's changelist wants one to take the action
            "selected": [wf.pk for wf in selected],
            "select_across": request.POST.get("select_across", "0"),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "django_jobqueue/admin/confirm_workflows.html", context)

    run.__name__ = f"bulk_{name}"
    run.short_description = f"{action.verb} (selected)"  # type: ignore[attr-defined]
    return run


def actions_for(request: HttpRequest) -> dict[str, tuple[Action, str, str]]:
    """The bulk actions this user may take, as ``ModelAdmin.get_actions`` returns them."""
    found: dict[str, tuple[Action, str, str]] = {}
    for name, action in ACTIONS.items():
        if request.user.has_perm(action.permission):
            fn = bulk(name)
            found[fn.__name__] = (fn, fn.__name__, f"{action.verb} (selected)")
    return found
