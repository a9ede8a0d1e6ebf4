"""The dashboard: the ``stats()`` snapshot as cards, a table per kind, the global limits
per kind, completed and failed runs over the last hour and day, workers, the queues with
pause/resume, and the periodic schedules."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.admin.models import CHANGE
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from django_jobqueue import conf, store
from django_jobqueue.admin import databases, history, table_health
from django_jobqueue.admin import live as live_pages
from django_jobqueue.admin.chart import chart
from django_jobqueue.admin.common import actor, back_to, badge, local, log
from django_jobqueue.admin.listing import QueueFilter
from django_jobqueue.errors import JobQueueError
from django_jobqueue.formatting import fmt_age, fmt_seconds
from django_jobqueue.store import live as store_live
from django_jobqueue.task import limiting
from django_jobqueue.task.periodic import overview

if TYPE_CHECKING:
    from django_jobqueue.admin.common import JobPages
    from django_jobqueue.store.snapshot import Stats, WorkerInfo

WINDOW = timedelta(hours=24)


def view(modeladmin: JobPages) -> Callable[[HttpRequest], HttpResponse]:
    def dashboard_view(request: HttpRequest) -> HttpResponse:
        if not modeladmin.has_view_permission(request):
            raise PermissionDenied
        now = timezone.now()
        # The run history when it is kept: a read that does not grow with the runs of
        # the day, as the journal's does (seconds, with a few hundred thousand a day).
        kept = conf.get().history_days > 0
        s = store.stats(window=WINDOW, now=now, history=kept)
        hour = store.throughput(
            since=now - timedelta(hours=1), bucket="minute", now=now, history=kept
        )
        day = store.throughput(since=now - WINDOW, bucket="hour", now=now, history=kept)
        schedules, schedules_error = _schedules(now)
        return TemplateResponse(
            request,
            "django_jobqueue/admin/dashboard.html",
            {
                **modeladmin.admin_site.each_context(request),
                "title": "Job queue dashboard",
                "queue_databases": databases.choices(),
                "opts": modeladmin.opts,
                "at": local(now),
                "cards": _cards(s),
                "kinds": _kinds(s),
                "limits": _limits(s),
                "hour": chart(hour, label_every=10, fmt="%H:%M"),
                "day": chart(day, label_every=4, fmt="%H:00"),
                "live": [_worker(w, now) for w in s.workers if w.alive],
                "gone": [_worker(w, now) for w in s.workers if not w.alive],
                "queues": _queues(s),
                "can_pause": modeladmin.has_pause_permission(request),
                "unserved": s.unserved_kinds,
                "schedules": schedules,
                "schedules_error": schedules_error,
                # Issue 34's panels, each in its own module and include.
                "table_health": table_health.panel(),
                "history": history.panel(request, now=now),
                "live_page": live_pages.context(
                    reverse("admin:django_jobqueue_job_live"),
                    reverse("admin:django_jobqueue_job_live_stamp"),
                    store_live.dashboard_stamp,
                ),
            },
        )

    return dashboard_view


def jobs_url(**query: str) -> str:
    """The jobs changelist filtered by ``query`` (its declared filters' parameters)."""
    return f"{reverse('admin:django_jobqueue_job_changelist')}?{urlencode(query)}"


def journal_url(**query: str) -> str:
    return f"{reverse('admin:django_jobqueue_journalentry_changelist')}?{urlencode(query)}"


def _cards(s: Stats) -> list[tuple[str, str, str, str]]:
    """(label, value, tone, the filtered list it counts) per card."""
    oldest = max(s.oldest_pending_seconds.values(), default=None)
    dead = sum(s.dead.values())
    return [
        ("pending now", f"{s.pending_total:,}", "pending", jobs_url(runnable="now")),
        ("scheduled", f"{s.scheduled:,}", "pending", jobs_url(runnable="later")),
        ("claimed", f"{s.claimed:,}", "claimed", jobs_url(status__exact="claimed")),
        ("dead jobs", f"{dead:,}", "dead" if dead else "quiet", jobs_url(status__exact="dead")),
        ("cancelled", f"{s.cancelled:,}", "cancelled", jobs_url(status__exact="cancelled")),
        (
            "oldest pending",
            fmt_age(oldest) if oldest is not None else "-",
            "pending",
            jobs_url(runnable="now"),
        ),
        (
            "waiting (workflow steps)",
            f"{s.waiting:,}",
            "waiting",
            jobs_url(status__exact="waiting"),
        ),
        ("sleeping", f"{s.sleeping:,}", "waiting", jobs_url(parked="sleep")),
        ("waiting for events", f"{s.waiting_for_events:,}", "waiting", jobs_url(parked="event")),
    ]


def _kinds(s: Stats) -> list[dict[str, Any]]:
    pending: dict[str, int] = {}
    for row in s.pending:
        pending[row.kind] = pending.get(row.kind, 0) + row.count
    names = sorted({*pending, *s.claimed_by_kind, *s.dead, *s.runs})
    rows = []
    for kind in names:
        runs = s.runs.get(kind)
        rows.append(
            {
                "kind": kind,
                "pending": pending.get(kind, 0),
                "claimed": s.claimed_by_kind.get(kind, 0),
                "dead": s.dead.get(kind, 0),
                "runs": runs.runs if runs else 0,
                "p50": fmt_seconds(runs.p50 if runs else None),
                "p95": fmt_seconds(runs.p95 if runs else None),
                "failure_rate": f"{runs.failure_rate:.1%}" if runs else "-",
                "unserved": kind in s.unserved_kinds,
                "urls": {
                    "pending": jobs_url(runnable="now", kind=kind),
                    "claimed": jobs_url(status__exact="claimed", kind=kind),
                    "dead": jobs_url(status__exact="dead", kind=kind),
                    "runs": journal_url(kind=kind),
                    "failures": journal_url(kind=kind, outcome="failure"),
                },
            }
        )
    return rows


def _limits(s: Stats) -> list[dict[str, Any]]:
    """Each kind with a global limit: its limits, where each is set, and its claims now;
    for a kind with per-key limits, its busiest keys (in flight, pending, oldest)."""
    rows = []
    found = limiting.limits(max_age=0)
    keyed = [k.kind for k in found if k.rule() is not None or k.per_key.get("rate_limit_per_key")]
    busiest = store.busiest_keys(kinds=keyed) if keyed else {}
    for k in found:
        claimed = s.claimed_by_kind.get(k.kind, 0)
        rows.append(
            {
                "kind": k.kind,
                "in_flight": claimed,
                "max_in_flight": k.max_in_flight,
                "max_in_flight_from": k.max_in_flight_from,
                "rate_limit": None if k.rate_limit is None else str(k.rate_limit),
                "rate_limit_from": k.rate_limit_from,
                "full": k.max_in_flight is not None and claimed >= k.max_in_flight,
                "per_key": k.per_key_summary(),
                "keys": busiest.get(k.kind, []),
            }
        )
    return rows


def worker_id(heartbeat_id: str) -> str:
    """A worker's id as jobs and the journal name it (``host:pid``, or ``--worker-id``):
    its heartbeat row's id less the instance suffix the row adds to tell restarts apart."""
    head, _, tail = heartbeat_id.rpartition(":")
    return head if head and _INSTANCE.fullmatch(tail) else heartbeat_id


_INSTANCE = re.compile(r"[0-9a-f]{8}")


def _worker(w: WorkerInfo, now: Any) -> dict[str, Any]:
    return {
        **dataclasses.asdict(w),
        "worker": worker_id(w.id),
        "seen": f"{fmt_age((now - w.last_seen_at).total_seconds())} ago",
        "queues_text": ", ".join(w.queues) or "all queues",
    }


def _queues(s: Stats) -> list[dict[str, Any]]:
    paused = {p.queue: p for p in s.paused_queues}
    pending: dict[str, int] = {}
    for row in s.pending:
        pending[row.queue] = pending.get(row.queue, 0) + row.count
    names = sorted({*QueueFilter.known(), *pending, *paused})
    return [
        {
            "name": name,
            "pending": pending.get(name, 0),
            "paused": paused.get(name),
            "paused_at": local(paused[name].paused_at) if name in paused else "",
        }
        for name in names
    ]


def _schedules(now: Any) -> tuple[list[dict[str, Any]], str]:
    """Each periodic schedule with its next run and last tick's job; or, when the
    schedules cannot be read (a PERIODIC setting naming an unknown kind), why."""
    try:
        rows = overview(now=now)
    except JobQueueError as exc:
        return [], str(exc)
    return [
        {
            "row": r,
            "next_run": local(r.next_run),
            "next_in": fmt_age((r.next_run - now).total_seconds()),
            "last_tick": local(r.last_tick) if r.last_tick else "",
            "status": badge(r.last_job_status) if r.last_job_status else "",
            "job_url": (
                reverse("admin:django_jobqueue_job_change", args=[r.last_job_id])
                if r.last_job_id and r.last_job_status != "removed"
                else ""
            ),
        }
        for r in rows
    ], ""


def queue_view(modeladmin: JobPages) -> Callable[[HttpRequest], HttpResponse]:
    @require_POST
    def pause_or_resume(request: HttpRequest) -> HttpResponse:
        if not modeladmin.has_pause_permission(request):
            raise PermissionDenied
        name = request.POST.get("queue", "")
        verb = request.POST.get("do", "")
        try:
            if verb == "pause":
                changed = store.pause_queue(queue=name, actor=actor(request))
            elif verb == "resume":
                changed = store.resume_queue(queue=name)
            else:
                raise ValueError(f"Unknown queue action {verb!r}: pause or resume")
        except ValueError as exc:
            messages.error(request, str(exc))
        else:
            done = f"{verb}d" if changed else f"was already {verb}d"
            text = f"Queue {name} {done}."
            messages.success(request, text)
            log(request, what=f"queue {name}", flag=CHANGE, message=text)
        # Back to the page the button was on (a job page's resume), if it is one of ours.
        return HttpResponseRedirect(
            back_to(request, reverse("admin:django_jobqueue_job_dashboard"))
        )

    return pause_or_resume
