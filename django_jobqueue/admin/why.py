"""The admin's answer to "why is this job not running" (``task.explain``): the job
page's line with a link to where the reason can be changed and, where an operation
lifts it and the operator may run it, that operation in place (resume the queue, run
now, requeue); and the jobs list's hover of the same reason, read once per page for
what its rows share (``Explainer``, brief).

The pages a reason links to: its job, the dashboard's queues, limits and workers
sections, its workflow. A limit is changed with ``jobqueue limit`` or ``set_limit()``
(the dashboard's limits section says so): there is no form for it here, so "raise the
limit" is that link.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.http import HttpRequest
from django.urls import reverse

from django_jobqueue.models import Job
from django_jobqueue.task.explain import Action, Explainer, Explanation, Target

DASHBOARD = "admin:django_jobqueue_job_dashboard"
# The dashboard section each target is changed in.
SECTIONS = {Target.QUEUE: "queues", Target.LIMITS: "limits", Target.WORKERS: "workers"}
LABELS = {
    Target.JOB: "the job",
    Target.QUEUE: "queues",
    Target.LIMITS: "limits",
    Target.WORKERS: "workers",
    Target.WORKFLOW: "the workflow",
}

# The jobs list's explainer for the page being drawn (``JobAdmin.changelist_view``).
LISTING: ContextVar[Explainer | None] = ContextVar("django_jobqueue_listing", default=None)


class Operator(Protocol):
    """The permissions of the jobs' ModelAdmin the actions in place need."""

    def has_pause_permission(self, request: HttpRequest) -> bool: ...

    def has_run_now_permission(self, request: HttpRequest) -> bool: ...

    def has_requeue_permission(self, request: HttpRequest) -> bool: ...


@dataclass(frozen=True)
class InPlace:
    """A button that posts ``fields`` to ``url``: the operation that lifts the reason."""

    url: str
    label: str
    fields: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Line:
    """The job page's line: the reason, its link, and its operation in place (or None)."""

    reason: Explanation
    url: str
    label: str
    action: InPlace | None


def link(reason: Explanation) -> tuple[str, str]:
    """(url, label) of the page where ``reason`` can be changed."""
    if reason.target is Target.JOB:
        url = reverse("admin:django_jobqueue_job_change", args=[reason.ref])
    elif reason.target is Target.WORKFLOW:
        url = reverse("admin:django_jobqueue_workflow_change", args=[reason.ref])
    else:
        url = f"{reverse(DASHBOARD)}#{SECTIONS[reason.target]}"
    label = LABELS[reason.target]
    if reason.action is Action.RAISE_LIMIT:
        label = "raise the limit (jobqueue limit, set_limit)"
    return url, label


def in_place(
    modeladmin: Operator, request: HttpRequest, job: Job, reason: Explanation
) -> InPlace | None:
    """The operation that lifts ``reason``, as a button, if the operator may run it."""
    page = reverse("admin:django_jobqueue_job_change", args=[job.pk])
    act = "admin:django_jobqueue_job_act"
    if reason.action is Action.RESUME_QUEUE and modeladmin.has_pause_permission(request):
        fields = [("queue", job.queue), ("do", "resume"), ("next", page)]
        return InPlace(reverse("admin:django_jobqueue_job_queue"), "Resume the queue", fields)
    if reason.action is Action.RUN_NOW and modeladmin.has_run_now_permission(request):
        return InPlace(reverse(act, args=[job.pk, "run_now"]), "Run now", [("post", "yes")])
    if reason.action is Action.REQUEUE and modeladmin.has_requeue_permission(request):
        return InPlace(reverse(act, args=[job.pk, "requeue"]), "Requeue", [("post", "yes")])
    return None


def line(modeladmin: Operator, request: HttpRequest, job: Job) -> Line:
    """The job page's line of why."""
    reason = Explainer().explain(job)
    url, label = link(reason)
    return Line(reason, url, label, in_place(modeladmin, request, job, reason))


def hover(job: Job) -> str:
    """The jobs list's hover of a row's reason (brief: no read per row but a keyed
    kind's key), with its code."""
    explainer = LISTING.get() or Explainer(brief=True)
    reason = explainer.explain(job)
    return f"{reason.code}: {reason.message}"


def listing() -> Any:
    """Set the list's explainer for one page; the token resets it."""
    return LISTING.set(Explainer(brief=True))
