"""The journal changelist: every entry across jobs, read-only, newest first."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import URLPattern, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from django_jobqueue.admin import databases, guard, tracebacks
from django_jobqueue.admin.common import (
    badge,
    duration,
    kind_cell,
    local,
    moment,
    pretty_json,
    short_id,
    short_time,
)
from django_jobqueue.admin.listing import EstimatingPaginator, RecentRangeFilter, kind_filter
from django_jobqueue.models import JournalEntry, Outcome
from django_jobqueue.redaction import redact_text
from django_jobqueue.store import sql

FAILURES = (Outcome.RETRIED, Outcome.DEAD, Outcome.STALE_RECOVERED)

# An entry's own (read-only) page: its attachment shown as the job page shows values,
# secret-named fields hidden, never Django's raw rendering of the JSON field.
ENTRY_FIELDS = (
    "job_link",
    "kind",
    "run_no",
    "outcome_badge",
    "started",
    "recorded",
    "run_duration",
    "note_shown",
    "attachment_shown",
    "worker",
    "actor",
)


if TYPE_CHECKING:  # the stubs make ModelAdmin generic; at run time it is not subscriptable
    ModelAdmin = admin.ModelAdmin[JournalEntry]
else:
    ModelAdmin = admin.ModelAdmin


class OutcomeFilter(admin.SimpleListFilter):
    """The outcomes, and "any failure" (retried, dead or stale-recovered) first."""

    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        return [("failure", "any failure"), *((o.value, o.label) for o in Outcome)]

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[JournalEntry]
    ) -> QuerySet[JournalEntry]:
        value = self.value()
        if value == "failure":
            return queryset.filter(outcome__in=FAILURES)
        return queryset.filter(outcome=value) if value else queryset


class JobFilter(admin.SimpleListFilter):
    """One job's entries: the job page's link to its whole journal. Shown only while
    applied (there is no list of every job to choose from)."""

    title = "job"
    parameter_name = "job__id__exact"

    def lookups(self, request: HttpRequest, model_admin: object) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, short_id(value))] if value else []

    def queryset(
        self, request: HttpRequest, queryset: QuerySet[JournalEntry]
    ) -> QuerySet[JournalEntry]:
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(job_id=uuid.UUID(value))
        except ValueError:
            raise IncorrectLookupParameters(f"job: {value!r} is not a job id") from None


class JournalEntryAdmin(ModelAdmin):
    def get_urls(self) -> list[URLPattern]:
        return databases.served(super().get_urls())

    # Fits a 1,280 px window with the sidebar and the filters open: a run's start and
    # duration in one cell, its worker or the operator (an entry has one or the other)
    # in another.
    list_display = [
        "recorded",
        "job_link",
        "kind_name",
        "run_no",
        "outcome_badge",
        "started_for",
        "short_note",
        "short_attachment",
        "by",
    ]
    list_display_links = None
    list_filter = [
        OutcomeFilter,
        kind_filter(JournalEntry),
        ("recorded_at", RecentRangeFilter),
        JobFilter,
    ]
    ordering = ["-recorded_at", "-id"]
    sortable_by = ["recorded"]
    paginator = EstimatingPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50
    actions = None
    fields = ENTRY_FIELDS
    readonly_fields = ENTRY_FIELDS

    def get_queryset(self, request: HttpRequest) -> QuerySet[JournalEntry]:
        return sql.journal_entries()

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        filters = self.get_list_filter(request) if request is not None else self.list_filter
        return guard.lookup_allowed(filters, lookup)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return guard.DeclaredChangeList

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: JournalEntry | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: JournalEntry | None = None) -> bool:
        return False

    @admin.display(description="recorded", ordering="recorded_at")
    def recorded(self, e: JournalEntry) -> SafeString:
        return moment(e.recorded_at)

    @admin.display(description="kind")
    def kind_name(self, e: JournalEntry) -> SafeString:
        return kind_cell(e.kind)

    @admin.display(description="job")
    def job_link(self, e: JournalEntry) -> SafeString:
        url = reverse("admin:django_jobqueue_job_change", args=[e.job_id])
        return format_html('<a href="{}">{}</a>', url, short_id(e.job_id))

    @admin.display(description="outcome")
    def outcome_badge(self, e: JournalEntry) -> SafeString:
        return badge(e.outcome)

    @admin.display(description="started")
    def started(self, e: JournalEntry) -> SafeString | str:
        if e.started_at is None:
            return ""
        return format_html(
            '<span title="{}">{}</span>', local(e.started_at), short_time(e.started_at)
        )

    @admin.display(description="started (duration)")
    def started_for(self, e: JournalEntry) -> SafeString | str:
        if e.started_at is None:
            return duration(e.duration) if e.duration is not None else ""
        return format_html(
            '<span title="{}">{}</span><br><small class="quiet">{}</small>',
            local(e.started_at),
            short_time(e.started_at),
            duration(e.duration),
        )

    @admin.display(description="worker / operator")
    def by(self, e: JournalEntry) -> SafeString | str:
        if e.worker and e.actor:
            return format_html("{}<br><small>{}</small>", e.worker, e.actor)
        return e.worker or e.actor

    @admin.display(description="duration")
    def run_duration(self, e: JournalEntry) -> str:
        return duration(e.duration)

    @admin.display(description="note")
    def short_note(self, e: JournalEntry) -> SafeString | str:
        # A failure's first line, the whole note (redacted, bounded) on hover.
        if not e.note:
            return ""
        shown = tracebacks.first_line(e.note) if e.outcome in FAILURES else redact_text(e.note)
        hover = redact_text(e.note[: tracebacks.HOVER_LIMIT])
        return format_html('<span title="{}">{}</span>', hover, Truncator(shown).chars(120))

    @admin.display(description="note")
    def note_shown(self, e: JournalEntry) -> SafeString | str:
        if e.outcome in FAILURES:
            return render_to_string(
                "django_jobqueue/admin/traceback.html", {"parts": tracebacks.parts(e.note)}
            )
        return format_html("{}", redact_text(e.note) or "-")

    @admin.display(description="attachment")
    def short_attachment(self, e: JournalEntry) -> str:
        if e.attachment is None:
            return ""
        return Truncator(pretty_json(e.attachment)).chars(60)

    @admin.display(description="attachment")
    def attachment_shown(self, e: JournalEntry) -> SafeString:
        if e.attachment is None:
            return format_html("{}", "-")
        return format_html("<pre>{}</pre>", pretty_json(e.attachment))
