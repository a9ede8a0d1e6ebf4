"""The jobs changelist and the read-only job page, with their operator actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import Case, OuterRef, QuerySet, Subquery, TextField, Value, When
from django.db.models.functions import Left
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobqueue import store, tracing
from django_jobqueue.admin import actions as job_actions
from django_jobqueue.admin import cleanup, dashboard, databases, guard, job_page, tracebacks, why
from django_jobqueue.admin import live as live_pages
from django_jobqueue.admin.common import (
    badge,
    duration,
    json_block,
    kind_cell,
    local,
    moment,
    short_id,
    short_time,
)
from django_jobqueue.admin.durable import ParkedFilter, parked_line, rerun_view, step_rows
from django_jobqueue.admin.journal import FAILURES
from django_jobqueue.admin.listing import (
    CreatedRangeFilter,
    EstimatingPaginator,
    KeyFilter,
    QueueFilter,
    RecentRangeFilter,
    RunnableFilter,
    WorkflowFilter,
    kind_filter,
    search_jobs,
)
from django_jobqueue.admin.workflows import step_links
from django_jobqueue.errors import JobNotFound
from django_jobqueue.models import Job, JournalEntry, Status
from django_jobqueue.progress import Progress, live
from django_jobqueue.redaction import redact_payload, redact_text
from django_jobqueue.store import live as store_live
from django_jobqueue.store import sql
from django_jobqueue.store.partitions import CLOCK_SKEW
from django_jobqueue.task.registry import registry

if TYPE_CHECKING:  # the stubs make ModelAdmin generic; at run time it is not subscriptable
    ModelAdmin = admin.ModelAdmin[Job]
else:
    ModelAdmin = admin.ModelAdmin

# The job page shows this many of the latest journal entries (the journal changelist,
# filtered by the job, has them all).
JOURNAL_SHOWN = 200


class JobAdmin(ModelAdmin):
    # Every column fits a 1,280 px window with the sidebar and the filters open: times
    # short (the date only when not today, the whole moment on hover), queue and
    # priority in one cell, runs with the last run's duration under them.
    list_display = [
        "short_id",
        "kind_name",
        "queue_priority",
        "status_badge",
        "created",
        "scheduled",
        "runs",
        "claim",
        "error",
    ]
    list_display_links = ["short_id"]
    list_filter = [
        "status",
        RunnableFilter,
        kind_filter(Job),
        QueueFilter,
        KeyFilter,
        "priority",
        ("created_at", CreatedRangeFilter),
        ("finished_at", RecentRangeFilter),
        WorkflowFilter,
        ParkedFilter,
    ]
    search_fields = ["id"]  # shows the search box; search_jobs does the looking up
    search_help_text = "An id (or the short id shown), a kind, a dedup key or an idempotency key."
    # Newest first: the id is a UUIDv7 of the job's creation, so the primary key is the
    # order of creation (the one order an index serves on every filter; migration 0029).
    ordering = ["-id"]
    sortable_by = ["created"]
    paginator = EstimatingPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    actions = [job_actions.bulk(a) for a in job_actions.ACTIONS.values()]

    # --- permissions: jobs are never added or edited here --------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if obj is not None and store.delete_refusal(obj) is not None:
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: Job) -> None:
        # Django's delete page, through the store (which never deletes an active job).
        store.delete_finished(job_ids=[obj.id])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        store.delete_finished(job_ids=list(queryset.values_list("id", flat=True)))

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # The journal goes with its job, through the store (its runs into the run tally):
        # deleting a job needs no permission to delete journal entries, which the admin
        # grants no one (without this, the delete page of any job that ran was a 403).
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(str(JournalEntry._meta.verbose_name))
        return deleted, counts, perms_needed, protected

    def _perm(self, request: HttpRequest, codename: str) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    def has_requeue_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "requeue_job")

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "cancel_job")

    def has_terminate_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "cancel_job")  # a stronger cancel: the same right

    def has_run_now_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "run_job_now")

    def has_cleanup_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "cleanup_job")

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return self._perm(request, "pause_queue")

    def has_action_permission(self, request: HttpRequest, action: job_actions.JobAction) -> bool:
        return self._perm(request, action.permission)

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        # Ours replace Django's delete_selected (which would delete pending jobs too).
        # action_location: Django 6.1's, passed on when given (5.2 has no such argument).
        if action_location is None:
            found = super().get_actions(request)
        else:
            found = super().get_actions(request, action_location)  # type: ignore[call-arg]
        return {name: found[name] for name in job_actions.ACTIONS if name in found}

    # --- the changelist ------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        # A job's entries are recorded from its creation on: a partitioned journal's
        # older partitions are pruned from each row's lookups (store.journal's rule).
        since = OuterRef("created_at") - CLOCK_SKEW
        last_run = (
            JournalEntry.objects.filter(
                job=OuterRef("pk"), recorded_at__gte=since, duration__isnull=False
            )
            .order_by("-id")
            .values("duration")[:1]
        )
        # The last failure's note, as far as the hover text shows it: read with the row
        # (one statement for the page, no query per row), through the journal's (job, id)
        # index, and only for a job whose failures are counted (a requeue resets them).
        last_error = (
            JournalEntry.objects.filter(
                job=OuterRef("pk"), recorded_at__gte=since, outcome__in=FAILURES
            )
            .order_by("-id")
            .values(shown=Left("note", tracebacks.HOVER_LIMIT))[:1]
        )
        # The list, the bulk confirmations and the delete page never read the large
        # columns; the job page reads its job whole (store.get_job).
        return (
            sql.jobs()
            .defer(*guard.LARGE_JOB_FIELDS)
            .annotate(
                last_run=Subquery(last_run),
                last_error=Case(
                    When(failure_count__gt=0, then=Subquery(last_error)),
                    default=Value(""),
                    output_field=TextField(),
                ),
            )
        )

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        filters = self.get_list_filter(request) if request is not None else self.list_filter
        return guard.lookup_allowed(filters, lookup)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return guard.DeclaredChangeList

    def response_action(
        self, request: HttpRequest, queryset: QuerySet[Job], action_location: Any = None
    ) -> HttpResponse | None:
        guard.selected_ids(request)  # a 400 for a selected id that is not a UUID
        if action_location is None:  # Django 5.2 has no such argument (as get_actions)
            return super().response_action(request, queryset)
        return super().response_action(request, queryset, action_location)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        return search_jobs(queryset, search_term), False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        name = request.POST.get("action", "") if request.method == "POST" else ""
        if name in job_actions.ACTIONS and not self.has_action_permission(
            request, job_actions.ACTIONS[name]
        ):
            raise PermissionDenied
        extra = {
            **(extra_context or {}),
            "can_cleanup": self.has_cleanup_permission(request),
            "queue_databases": databases.choices(),
        }
        token = why.listing()  # the rows' reasons share one read of what they share
        try:
            response = super().changelist_view(request, extra)
            if isinstance(response, TemplateResponse):
                response.render()
            return response
        finally:
            why.LISTING.reset(token)

    @admin.display(description="id")
    def short_id(self, job: Job) -> str:
        return short_id(job.id)  # it wraps at its dash: the column stays narrow

    @admin.display(description="kind")
    def kind_name(self, job: Job) -> SafeString:
        return kind_cell(job.kind)

    @admin.display(description="queue / priority")
    def queue_priority(self, job: Job) -> SafeString:
        return format_html(
            '{}<br><small class="quiet">{}</small>', job.queue, job.get_priority_display()
        )

    @admin.display(description="status")
    def status_badge(self, job: Job) -> SafeString:
        progress = live_progress(job)
        # Why it is where it is, on hover of its badge (the job page has it as a line).
        badge_ = format_html(
            '<span class="jq-why" title="{}">{}</span>', why.hover(job), status_of(job)
        )
        if progress is None:
            return badge_
        # A running job's bar, under its badge, compact: its note on hover only, so the
        # status column stays as narrow as a badge (the job page has a line of its own).
        bar = render_to_string(
            "django_jobqueue/admin/progress.html", {"progress": progress, "compact": True}
        )
        return format_html("{}<br>{}", badge_, bar)

    @admin.display(description="created", ordering="id")  # the order of creation
    def created(self, job: Job) -> SafeString:
        return moment(job.created_at)

    @admin.display(description="scheduled for")
    def scheduled(self, job: Job) -> SafeString | str:
        if store.run_now_refusal(job, now=timezone.now()) is not None:
            return ""  # not a pending job scheduled for later
        unbounded = job_page.no_time_set(job)
        if unbounded is not None:  # not "9999-01-01, in 2,911,739 days"
            return format_html('<small class="quiet">{}</small>', unbounded)
        return moment(job.visible_at)

    @admin.display(description="runs / failures (last run)")
    def runs(self, job: Job) -> SafeString:
        return format_html(
            '{} / {}<br><small class="quiet">{}</small>',
            job.run_count,
            job.failure_count,
            duration(getattr(job, "last_run", None)),
        )

    @admin.display(description="claimed by (lease end)")
    def claim(self, job: Job) -> SafeString | str:
        if job.status != Status.CLAIMED:
            return ""
        return format_html(
            '{}<br><small class="quiet" title="{}">until {}</small>',
            job.claimed_by,
            local(job.claim_expires_at),
            short_time(job.claim_expires_at),
        )

    @admin.display(description="last error")
    def error(self, job: Job) -> SafeString | str:
        note = getattr(job, "last_error", None) or ""
        if not note:
            return ""
        shown, hover = tracebacks.cell(note)
        # Red while it matters (dead, or to be retried); grey once the job completed.
        past = " jq-past" if job.status == Status.COMPLETED else ""
        return format_html('<span class="jq-error{}" title="{}">{}</span>', past, hover, shown)

    # --- the job page, its actions, and the other pages ----------------------------------

    def get_urls(self) -> list[URLPattern]:
        return databases.served(self._urls())

    def _urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path("dashboard/", wrap(dashboard.view(self)), name=f"{name}_dashboard"),
            path("dashboard/queue/", wrap(dashboard.queue_view(self)), name=f"{name}_queue"),
            path("dashboard/live/", wrap(live_pages.dashboard_events(self)), name=f"{name}_live"),
            path(
                "dashboard/live/stamp/",
                wrap(live_pages.dashboard_stamp(self)),
                name=f"{name}_live_stamp",
            ),
            path("cleanup/", wrap(cleanup.view(self)), name=f"{name}_cleanup"),
            path("database/", wrap(databases.select_view(self)), name=f"{name}_database"),
            path("<path:object_id>/live/", wrap(self.live_view), name=f"{name}_job_live"),
            path(
                "<path:object_id>/live/stamp/",
                wrap(self.live_stamp_view),
                name=f"{name}_job_live_stamp",
            ),
            path("<path:object_id>/rerun/", wrap(rerun_view(self)), name=f"{name}_rerun"),
            path(
                "<path:object_id>/act/<str:name>/",
                wrap(self.action_view),
                name=f"{name}_act",
            ),
            *super().get_urls(),
        ]

    def _job(self, request: HttpRequest, object_id: str) -> Job:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            return store.get_job(job_id=object_id)
        except JobNotFound:
            raise Http404(f"No job with id {object_id}") from None

    def live_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The job page's event stream (``admin.live``)."""
        job = self._job(request, object_id)
        return live_pages.events(request, live_pages.job_wanted(str(job.id)))

    def live_stamp_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        job = self._job(request, object_id)
        return live_pages.job_stamp(job.id)

    def action_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        job = self._job(request, object_id)
        if name not in job_actions.ACTIONS:
            raise Http404(f"No action {name!r}")
        response = job_actions.confirm_or_apply(
            self, request, job_actions.ACTIONS[name], [job], changelist=False
        )
        assert response is not None
        return response

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        job = self._job(request, object_id)
        return TemplateResponse(
            request, "django_jobqueue/admin/job.html", self.job_context(request, job)
        )

    def job_context(self, request: HttpRequest, job: Job) -> dict[str, Any]:
        now = timezone.now()
        entries = store.journal(job_id=job.id, last=JOURNAL_SHOWN + 1, since=job.created_at)
        allowed = [
            a
            for a in job_actions.ACTIONS.values()
            if self.has_action_permission(request, a)
            and (a.refusal(job, False) is None or a.refusal(job, True) is None)
        ]
        return {
            **self.admin_site.each_context(request),
            "title": f"{job.kind} {short_id(job.id)}",
            "subtitle": str(job.id),
            "opts": self.opts,
            "job": job,
            # Formatted here, not by the template's date filter, so that a time whose
            # local form does not exist (near year 1 or 9999) is shown, in UTC.
            "times": {name: local(getattr(job, name)) for name in JOB_TIMES},
            "status": job_page.status_of(job, now),
            "progress": live_progress(job),
            "trace_id": tracing.trace_id(job.trace_context),
            "blocks": [
                (label, json_block(value))
                for label, value in (
                    ("payload", redact_payload(job.payload, task=registry.find(job.kind))),
                    ("carry", job.carry),
                    ("result", job.result),
                )
            ],
            "journal": [_entry(e) for e in entries[-JOURNAL_SHOWN:]],
            "journal_more": len(entries) > JOURNAL_SHOWN,
            "journal_empty": job_page.empty_journal(job),
            "logs": job_page.run_logs(job),
            "last_error": job_page.last_error(entries) if job.run_count else None,
            "state_rows": job_page.state_rows(job, now),
            "why": why.line(self, request, job),
            "allowed": allowed,
            "step": step_links(job),
            "parked": parked_line(job),
            "steps": step_rows(job),
            "stream": job_page.stream_section(job),
            "rerun": self.has_requeue_permission(request) and not store.rerun_refusal(job),
            "now": now,
            "has_view_permission": True,
            "live_page": live_pages.context(
                reverse("admin:django_jobqueue_job_job_live", args=[job.pk]),
                reverse("admin:django_jobqueue_job_job_live_stamp", args=[job.pk]),
                lambda: store_live.job_stamp(job_id=job.pk),
            ),
        }


JOB_TIMES = ("created_at", "visible_at", "claim_expires_at", "finished_at")


def status_of(job: Job) -> SafeString:
    return job_page.status_of(job, timezone.now())


def live_progress(job: Job) -> Progress | None:
    """A running job's progress as its worker last wrote it (None when it is not
    running, or its run reported none): what the list's bar and the job page show."""
    return live(job.status, job.progress_done, job.progress_total, job.progress_note)


def _entry(e: JournalEntry) -> dict[str, Any]:
    return {
        "entry": e,
        "outcome": badge(e.outcome),
        "started": local(e.started_at),
        "recorded": local(e.recorded_at),
        "duration": duration(e.duration),
        # A failure's note is a traceback, shown folded; any note redacted.
        "note": tracebacks.parts(e.note) if e.outcome in FAILURES else None,
        "plain_note": redact_text(e.note),
        "attachment": json_block(e.attachment) if e.attachment is not None else None,
    }
