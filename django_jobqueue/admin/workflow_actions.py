"""The operator actions on one workflow: cancel it, retry its dead steps.

As for jobs (``actions.py``), the admin holds no rule of its own: each action is the
store's operation (``store.cancel_workflow``, ``store.retry_dead_steps``), which
journals every step it changes; the admin asks for a confirmation (a POST with Django's
CSRF token), checks the permission on both requests and records a ``LogEntry``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from django_jobqueue import store
from django_jobqueue.admin.common import actor
from django_jobqueue.errors import InvalidTransition, WorkflowNotFound
from django_jobqueue.models import Workflow, WorkflowStatus

if TYPE_CHECKING:
    from django.contrib.admin import AdminSite
    from django.contrib.admin.models import LogEntry
    from django.db.models.options import Options


class WorkflowPages(Protocol):
    """What the actions use of the workflows' ModelAdmin (which imports this module for
    its actions: typing them against it would be a circle)."""

    admin_site: AdminSite
    opts: Options[Any]

    def workflow_or_404(self, request: HttpRequest, object_id: str) -> Workflow: ...

    def log_change(self, request: HttpRequest, obj: Workflow, message: Any) -> LogEntry: ...


@dataclass(frozen=True)
class WorkflowAction:
    name: str
    verb: str
    permission: str  # "app_label.codename"
    refusal: Callable[[Workflow], str | None]  # why it does not apply now, or None
    perform: Callable[[Workflow, str], str]  # does it; what it did, for the message
    explain: str


def _cancel_refusal(wf: Workflow) -> str | None:
    if wf.cancel_requested or wf.status == WorkflowStatus.CANCELLED:
        return "it is cancelled already"
    if wf.status != WorkflowStatus.RUNNING:
        return f"it is {wf.status}: only a running workflow can be cancelled"
    return None


def _cancel(wf: Workflow, who: str) -> str:
    done = store.cancel_workflow(workflow_id=wf.id, actor=who)
    if done.status == WorkflowStatus.CANCELLED:
        return f"Cancelled workflow {wf.name}."
    return f"Cancelled workflow {wf.name}; its running steps stop when their workers see it."


def _retry_refusal(wf: Workflow) -> str | None:
    return None if wf.steps_dead else "it has no dead step"


def _retry(wf: Workflow, who: str) -> str:
    ids = store.retry_dead_steps(workflow_id=wf.id, actor=who)
    return f"Requeued {len(ids)} dead step{'s' if len(ids) != 1 else ''} of workflow {wf.name}."


ACTIONS: dict[str, WorkflowAction] = {
    a.name: a
    for a in (
        WorkflowAction(
            "cancel",
            "Cancel workflow",
            "django_jobqueue.cancel_workflow",
            _cancel_refusal,
            _cancel,
            "Every step that has not finished is cancelled: waiting and pending ones at "
            "once, running ones when their workers see it (a cooperative task stops at its "
            "next check). Finished steps keep their results.",
        ),
        WorkflowAction(
            "retry_dead",
            "Retry dead steps",
            "django_jobqueue.requeue_job",
            _retry_refusal,
            _retry,
            "Each dead step goes back to pending, runnable now, and the steps its death "
            "cancelled wait for it again: the workflow carries on from where it failed.",
        ),
    )
}


def allowed(request: HttpRequest, wf: Workflow) -> list[WorkflowAction]:
    """The actions this user may take on ``wf`` now."""
    return [
        a for a in ACTIONS.values() if request.user.has_perm(a.permission) and a.refusal(wf) is None
    ]


def view(
    modeladmin: WorkflowPages, request: HttpRequest, object_id: str, name: str
) -> HttpResponse:
    """The confirmation page of an action (GET), or the action itself (POST post=yes)."""
    wf = modeladmin.workflow_or_404(request, object_id)
    action = ACTIONS.get(name)
    if action is None:
        raise Http404(f"No workflow action {name!r}")
    if not request.user.has_perm(action.permission):
        raise PermissionDenied
    page = request.path.rsplit("act/", 1)[0]
    if request.method == "POST" and request.POST.get("post") == "yes":
        refusal = action.refusal(wf)
        if refusal is not None:
            messages.warning(request, f"{action.verb}: nothing done, {refusal}.")
            return HttpResponseRedirect(page)
        who = actor(request)
        try:
            text = action.perform(wf, who)
        except (InvalidTransition, WorkflowNotFound) as exc:
            messages.warning(request, f"{action.verb}: nothing done, {exc}")
            return HttpResponseRedirect(page)
        modeladmin.log_change(request, wf, f"{action.verb} by {who}")
        messages.success(request, text)
        return HttpResponseRedirect(page)
    context: dict[str, Any] = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{action.verb}: are you sure?",
        "opts": modeladmin.opts,
        "workflow": wf,
        "action": action,
        "refusal": action.refusal(wf),
        "back": page,
    }
    return TemplateResponse(request, "django_jobqueue/admin/confirm_workflow.html", context)
