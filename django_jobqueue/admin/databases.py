"""The admin over several queue databases: which one a page shows (the one the
operator chose, kept in the session; a job's or workflow's own page follows its id to
the database holding it), the selector that chooses it, and every view of the queue's
ModelAdmins run on that database (``serving``), so that a list, a job page, an action
or the dashboard reads and writes where its jobs are.

With one queue database nothing here runs a statement: ``serving`` calls the view.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse
from django.views.decorators.http import require_POST

from django_jobqueue import conf, routing, store
from django_jobqueue.admin.common import back_to
from django_jobqueue.errors import ConfigurationError

SESSION_KEY = "django_jobqueue_database"
# The pages a READ replica serves (by their URL names' ends): the lists and the dashboard.
READ_PAGES = ("_changelist", "_dashboard")
View = Callable[..., HttpResponseBase]


def selected(request: HttpRequest) -> str:
    """The queue database the operator chose (HOME until they choose, or when the
    choice is no longer a queue database)."""
    chosen = getattr(request, "session", {}).get(SESSION_KEY)
    return chosen if chosen in routing.aliases() else conf.get().database


def _object_database(kwargs: dict[str, Any], workflows: bool) -> str | None:
    """The database holding the job (or workflow) a page names by its id, if any."""
    object_id = kwargs.get("object_id")
    if object_id is None:
        return None
    try:
        key = uuid.UUID(str(object_id))
    except ValueError:
        return None
    return store.database_of_workflow(key) if workflows else store.database_of_job(key)


def serving(view: View, *, workflows: bool = False, reads: bool = False) -> View:
    """``view`` run on the chosen queue database (a page of one job or workflow: on the
    database holding it), its template rendered there too (a list's rows are read
    while it renders)."""

    @wraps(view)
    def on_database(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not routing.several():
            return view(request, *args, **kwargs)
        alias = shown = _object_database(kwargs, workflows) or selected(request)
        if reads and request.method in ("GET", "HEAD"):
            # A list or the dashboard, only looked at: its READ replica, if it has one
            # (an action's POST, even from a list, goes to the database itself).
            with routing.using(alias):
                alias = routing.read_alias()
        with routing.using(alias):
            response = view(request, *args, **kwargs)
            if isinstance(response, TemplateResponse) and not response.is_rendered:
                # The selector's choices for a page that renders here (the workflows'
                # and the journal's lists; the jobs list and the dashboard give them).
                response.context_data = {
                    "queue_databases": choices(shown),
                    **(response.context_data or {}),
                }
                response.render()
            return response

    return on_database


def choices(shown: str | None = None) -> dict[str, Any] | None:
    """The selector's context: the database shown (default: the current one, unless
    it is a READ replica: then the database it stands for) and every queue database
    (None with one: no selector)."""
    if not routing.several():
        return None
    current = shown or routing.current()
    if current not in routing.aliases():
        replicas = conf.get().databases
        found = [a for a, r in (replicas.read.items() if replicas else ()) if r == current]
        current = found[0] if found else conf.get().database
    return {"current": current, "all": routing.aliases()}


def served(patterns: list[Any], *, workflows: bool = False) -> list[Any]:
    """Each of a ModelAdmin's URL patterns, its view run by ``serving``."""
    for pattern in patterns:
        if isinstance(pattern, URLPattern):
            reads = (pattern.name or "").endswith(READ_PAGES)
            pattern.callback = serving(pattern.callback, workflows=workflows, reads=reads)
    return patterns


def select_view(modeladmin: Any) -> View:
    """POST ``database`` (one of the queue databases) and ``next`` (a page of this
    site): the admin's pages show that database from now on, in this session."""

    @require_POST
    def select_database(request: HttpRequest) -> HttpResponseBase:
        if not modeladmin.has_view_permission(request):
            raise PermissionDenied
        try:
            alias = routing.check(request.POST.get("database", ""))
        except ConfigurationError as exc:
            raise PermissionDenied(str(exc)) from None
        request.session[SESSION_KEY] = alias
        return HttpResponseRedirect(
            back_to(request, reverse("admin:django_jobqueue_job_changelist"))
        )

    return select_database
