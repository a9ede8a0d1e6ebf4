"""The workflows changelist and the workflow page: its steps' counts and its graph.

Workflows are never added, edited or deleted here: they are written by enqueue and
removed with their steps by cleanup once finished. Reads go through
``django_jobqueue.store.graphs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from django_jobqueue.admin import databases, guard, workflow_actions, workflow_bulk
from django_jobqueue.admin import live as live_pages
from django_jobqueue.admin.common import COLOURS, age, badge, local, short_id
from django_jobqueue.admin.graph import NODE_CAP, STATUS_ORDER, layout
from django_jobqueue.admin.listing import EstimatingPaginator, RecentRangeFilter, by_id
from django_jobqueue.models import Workflow, WorkflowStatus
from django_jobqueue.store import graphs
from django_jobqueue.store import live as store_live
from django_jobqueue.store.graphs import Step

if TYPE_CHECKING:  # generic in the stubs only
    ModelAdmin = admin.ModelAdmin[Workflow]
else:
    ModelAdmin = admin.ModelAdmin

# The workflow page reads at most this many steps to draw (a drawing shows at most
# graph.NODE_CAP nodes whatever it reads; past this, it says it drew a part).
GRAPH_READ_CAP = 20_000

STEPS = "admin:django_jobqueue_job_changelist"
STEP = "admin:django_jobqueue_job_change"
LIVE = "admin:django_jobqueue_workflow"


class WorkflowAdmin(ModelAdmin):
    list_display = ["short_id", "name", "shape", "status_badge", "steps", "created", "finished"]
    list_display_links = ["short_id", "name"]
    list_filter = [
        "status",
        "shape",
        ("created_at", RecentRangeFilter),
        ("finished_at", RecentRangeFilter),
    ]
    search_fields = ["id"]  # shows the search box; get_search_results does the looking up
    search_help_text = "A workflow id (or the short id shown), or a workflow's exact name."
    ordering = ["-created_at", "-id"]
    sortable_by = ["created"]
    paginator = EstimatingPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50

    def get_actions(self, request: HttpRequest, action_location: Any = None) -> dict[str, Any]:
        """Only the queue's bulk actions (``workflow_bulk``) this user may take: a
        workflow is never deleted here. They are the changelist's: Django 6.1 also asks
        for a change form's (``action_location``; 5.2 has no such argument)."""
        if action_location is not None and getattr(action_location, "value", "") != "CHANGE_LIST":
            return {}
        return dict(workflow_bulk.actions_for(request))

    # --- permissions: written by enqueue, removed by cleanup -----------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Workflow | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Workflow | None = None) -> bool:
        return False  # a delete would take running steps with it: cleanup removes them

    # --- the changelist ------------------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Workflow]:
        return graphs.workflows()

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        filters = self.get_list_filter(request) if request is not None else self.list_filter
        return guard.lookup_allowed(filters, lookup)

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return guard.DeclaredChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Workflow], search_term: str
    ) -> tuple[QuerySet[Workflow], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        found = by_id(queryset, term)
        return (found if found is not None else queryset.filter(name=term[:200])), False

    @admin.display(description="id")
    def short_id(self, wf: Workflow) -> str:
        return short_id(wf.id)

    @admin.display(description="status")
    def status_badge(self, wf: Workflow) -> SafeString:
        if wf.status == WorkflowStatus.RUNNING and wf.cancel_requested:
            return format_html("{} {}", badge(wf.status), badge("cancelled"))
        return badge(wf.status)

    @admin.display(description="steps done / total")
    def steps(self, wf: Workflow) -> SafeString:
        done = wf.steps_total - wf.steps_open
        dead = format_html(' <small class="quiet">({} dead)</small>', wf.steps_dead)
        return format_html("{} / {}{}", done, wf.steps_total, dead if wf.steps_dead else "")

    @admin.display(description="created", ordering="created_at")
    def created(self, wf: Workflow) -> SafeString:
        return format_html(
            '{}<br><small class="quiet">{}</small>', local(wf.created_at), age(wf.created_at)
        )

    @admin.display(description="finished")
    def finished(self, wf: Workflow) -> str:
        return local(wf.finished_at) if wf.finished_at else ""

    # --- the workflow page and its actions ----------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_act"
        act = self.admin_site.admin_view(self.action_view)
        page = f"{self.opts.app_label}_{self.opts.model_name}"
        return databases.served([*self._urls(act, name, page), *super().get_urls()], workflows=True)

    def _urls(self, act: Any, name: str, page: str) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/act/<str:name>/", act, name=name),
            path("<path:object_id>/live/", wrap(self.live_view), name=f"{page}_live"),
            path(
                "<path:object_id>/live/stamp/",
                wrap(self.live_stamp_view),
                name=f"{page}_live_stamp",
            ),
        ]

    def live_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """The workflow page's event stream (``admin.live``)."""
        wf = self.workflow_or_404(request, object_id)
        return live_pages.events(request, live_pages.workflow_wanted(str(wf.id)))

    def live_stamp_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        wf = self.workflow_or_404(request, object_id)
        return live_pages.workflow_stamp(wf.id)

    def action_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        return workflow_actions.view(self, request, object_id, name)

    def workflow_or_404(self, request: HttpRequest, object_id: str) -> Workflow:
        if not self.has_view_permission(request):
            raise PermissionDenied
        found = graphs.get_workflow(workflow_id=object_id)
        if found is None:
            raise Http404(f"No workflow with id {object_id}")
        return found

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        wf = self.workflow_or_404(request, object_id)
        return TemplateResponse(
            request, "django_jobqueue/admin/workflow.html", self.workflow_context(request, wf)
        )

    def workflow_context(self, request: HttpRequest, wf: Workflow) -> dict[str, Any]:
        drawn = graphs.graph(workflow_id=wf.id, limit=GRAPH_READ_CAP)
        steps_url = reverse(STEPS)

        def group_url(status: str, kind: str) -> str:
            query = {"workflow": str(wf.id), "status__exact": status, "kind": kind}
            return f"{steps_url}?{urlencode({k: v for k, v in query.items() if v})}"

        def step_url(step: Step) -> str:
            return reverse(STEP, args=[step.id])

        counts = graphs.step_counts(workflow_id=wf.id)
        return {
            **self.admin_site.each_context(request),
            "title": f"{wf.name} {short_id(wf.id)}",
            "subtitle": str(wf.id),
            "opts": self.opts,
            "workflow": wf,
            "status": self.status_badge(wf),
            "allowed": workflow_actions.allowed(request, wf),
            "times": {name: local(getattr(wf, name)) for name in ("created_at", "finished_at")},
            "counts": [(s, counts[s], badge(s), group_url(s, "")) for s in sorted(counts)],
            "steps_url": group_url("", ""),
            "graph": layout(drawn.steps, drawn.edges, step_url=step_url, group_url=group_url),
            "graph_complete": drawn.complete,
            "graph_read": len(drawn.steps),
            "node_cap": NODE_CAP,
            "legend": [(s, COLOURS[s]) for s in STATUS_ORDER],
            "has_view_permission": True,
            "live_page": live_pages.context(
                reverse(f"{LIVE}_live", args=[wf.id]),
                reverse(f"{LIVE}_live_stamp", args=[wf.id]),
                lambda: store_live.workflow_stamp(workflow_id=wf.id),
            ),
        }


# The job page lists at most this many of a step's parents and of its children.
LINKS_SHOWN = 50


def step_links(job: Any) -> dict[str, Any] | None:
    """What the job page of a workflow's step shows of it: its workflow, its parents
    and its children, each linked (None for a plain job)."""
    if job.workflow_id is None:
        return None
    wf = graphs.get_workflow(workflow_id=job.workflow_id)
    n_parents, n_children = graphs.edge_counts(job_id=job.id)

    def linked(steps: list[Step]) -> list[dict[str, Any]]:
        return [
            {"step": s, "url": reverse(STEP, args=[s.id]), "status": badge(s.status)} for s in steps
        ]

    return {
        "workflow": wf,
        "workflow_url": reverse("admin:django_jobqueue_workflow_change", args=[job.workflow_id])
        if wf is not None
        else "",
        "workflow_status": badge(wf.status) if wf is not None else "",
        "name": job.step_name or "",
        "join_when": job.join_when or "completed",
        "parents_open": job.parents_open,
        "parents": linked(graphs.parents(job_id=job.id, limit=LINKS_SHOWN)),
        "children": linked(graphs.children(job_id=job.id, limit=LINKS_SHOWN)),
        "parents_more": max(n_parents - LINKS_SHOWN, 0),
        "children_more": max(n_children - LINKS_SHOWN, 0),
        "steps_url": f"{reverse(STEPS)}?{urlencode({'workflow': str(job.workflow_id)})}",
    }
