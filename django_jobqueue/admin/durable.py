"""What the admin shows of a job's durable steps: its recorded steps (results redacted
as every stored value is), where a parked job is (its sleep's wake time, the event it
waits for), and the changelist's filter of parked jobs; and the steps table's action,
re-running the job from one of its steps (``store.rerun_from``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import reverse
from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.admin.common import actor, duration, json_block, local
from django_jobqueue.errors import JobNotFound, JobQueueError
from django_jobqueue.models import Job, Status
from django_jobqueue.store.durable import records

PARKED = {"sleep": "sleeping", "event": "waiting for an event"}


def parked_line(job: Job) -> str:
    """Where a parked pending job is ("" for any other, and for one already runnable: its
    time came, or an operator ran it now): the sleep's wake time or the event it waits
    for and until when."""
    if job.status != Status.PENDING or job.parked not in PARKED or job.visible_at <= timezone.now():
        return ""
    until = local(job.wake_at) if job.wake_at is not None else ""
    if job.parked == "sleep":
        return f"sleeping until {until}"
    wait = f"waiting for event {job.wait_name!r} key {job.wait_key!r}"
    return f"{wait} until {until} (then None)" if until else f"{wait} (no timeout)"


def step_rows(job: Job) -> list[dict[str, Any]]:
    """The job's recorded steps, oldest first, as the job page's table shows them (a
    stored record that cannot be read is left out)."""
    return [_row(r) for r in records(job_id=job.id) if isinstance(r, dict)]


def _row(record: dict[str, Any]) -> dict[str, Any]:
    kind = record.get("kind", "")
    seconds = record.get("seconds")
    if kind == "sleep":
        shown: Any = {"until": record.get("until")}
    elif kind == "wait":
        shown = {
            "event": record.get("event"),
            "key": record.get("key"),
            "timed_out": record.get("timed_out"),
            "payload": record.get("payload"),
        }
    elif kind == "child":  # a child workflow enqueued (run.children)
        shown = {"workflow": record.get("workflow"), "depth": record.get("depth")}
    elif kind == "joined" and record.get("failed"):
        shown = {k: record.get(k) for k in ("workflow", "step", "status", "error")}
    else:
        shown = record.get("result")
    return {
        "name": record.get("name", ""),
        "kind": kind,
        "run": record.get("run"),
        "at": _when(record.get("at")),
        "duration": duration(timedelta(seconds=seconds))
        if isinstance(seconds, float | int)
        else "-",
        "block": json_block(shown),
    }


def rerun_view(modeladmin: Any) -> Callable[[HttpRequest, str], HttpResponse]:
    """The steps table's "re-run from here" (a POST naming the ``step``): with the
    view and requeue permissions, the job re-run from that step, journalled with the admin user;
    a refusal (a run in flight, no such step) is shown as an error on the job page."""

    def view(request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not (
            modeladmin.has_view_permission(request) and modeladmin.has_requeue_permission(request)
        ):
            raise PermissionDenied
        opts = modeladmin.opts
        page = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[object_id])
        step = request.POST.get("step", "")
        who = actor(request)
        try:
            job = store.rerun_from(job_id=object_id, step=step, actor=who)
        except JobNotFound:
            raise Http404(f"No job with id {object_id}") from None
        except JobQueueError as exc:
            messages.error(request, str(exc))
        else:
            modeladmin.log_change(request, job, f"re-run from step {step!r} by {who}")
            messages.success(request, f"Re-running from step {step!r}: the job is pending.")
        return HttpResponseRedirect(page)

    return view


def _when(text: Any) -> str:
    try:
        return local(datetime.fromisoformat(str(text)))
    except ValueError:
        return "-"


class ParkedFilter(admin.SimpleListFilter):
    """Pending jobs parked by a durable sleep or a wait for an event."""

    title = "parked"
    parameter_name = "parked"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(PARKED.items())

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value not in PARKED:
            return queryset
        return queryset.filter(status=Status.PENDING, parked=value)
