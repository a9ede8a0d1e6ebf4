"""Every page and every POST endpoint of the queue's admin, derived from the admin site:
each URL pattern of each registered model of the app (its changelist, change, history,
delete and add views and the custom views the admin adds: dashboard, queue pause, clean-up,
the per-job actions), with its parameters filled from the world, and what each needs.

A new view in the admin is a new URL name that no page or endpoint here reaches, and the
coverage test fails: no view escapes the red-team suite unseen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlencode

from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver
from django.utils import timezone

from django_jobqueue.admin.actions import ACTIONS
from django_jobqueue.models import TERMINAL, Job
from tests.security.world import HOSTILE_KIND, OLD, World, hostile, paused

APP = "django_jobqueue"

VIEW_JOB = frozenset({"view_job"})
VIEW_JOURNAL = frozenset({"view_journalentry"})
LISTED = frozenset({"view_job", "view_journalentry", "delete_job", "view_workflow"})


def admin_urls() -> dict[str, str]:
    """Each named URL of the app's registered model admins: name to route."""
    found: dict[str, str] = {}

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, str]]:
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern) and p.name:
                yield p.name, prefix + str(p.pattern)

    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label == APP:
            found.update(walk(model_admin.get_urls(), ""))
    return found


@dataclass(frozen=True)
class Page:
    """A GET: its URL, the permissions it needs and the hostile tokens it shows."""

    key: str
    url: str
    needs: frozenset[str] | None
    shows: tuple[str, ...] = ()
    any_of: bool = False  # any one of ``needs`` is enough (the app index)
    refused: int = 403  # the status for a staff user who lacks ``needs``
    # The status for one who may: a live page's event stream answers 204 where nothing
    # can tell it of changes (SQLite, MariaDB: the page polls its stamp instead).
    shown: int = 200
    # In the role matrix: one page per view (and per deletable state); the variants of a
    # view that only change what it shows are for the XSS tests alone.
    roles: bool = True


JOB_TOKENS = {
    "pending": ("pkey", "pvalue", "url", "idem", "dedup", "ckey", "carry"),
    "scheduled": ("pkey", "pvalue"),
    "claimed": ("claimer", "canceller"),
    "completed": ("result",),
    "dead": ("note", "traceback", "akey", "attach", "worker", "actor"),
}
ACT_ON = {"requeue": "dead", "cancel": "pending", "run_now": "scheduled", "terminate": "pending"}
ACT_ON["delete_selected"] = "completed"


def _job_pages(world: World) -> Iterator[Page]:
    base = f"/admin/{APP}/job/"
    for state, job in world.hostile.items():
        shows = ("kind", "queue", *JOB_TOKENS[state])
        change = f"{base}{job.pk}/change/"
        yield Page(f"job change [{state}]", change, VIEW_JOB, shows, roles=state == "pending")
        deletable = state in TERMINAL
        yield Page(
            f"job delete [{state}]",
            f"{base}{job.pk}/delete/",
            frozenset({"delete_job"}) if deletable else None,
            ("kind",) if deletable else (),
        )
    dead = world.hostile["dead"]
    yield Page("job history", f"{base}{dead.pk}/history/", VIEW_JOB, ("kind", "logmsg"))
    for name, action in ACTIONS.items():
        job = world.hostile[ACT_ON[name]]
        needs = frozenset({"view_job", action.permission})
        yield Page(f"act {name}", f"{base}{job.pk}/act/{name}/", needs, ("kind",))
    yield Page("job add", f"{base}add/", None)
    yield Page("dashboard", f"{base}dashboard/", VIEW_JOB, DASHBOARD_TOKENS)
    # The live pages' event streams (a stream of change notices, no page content; 204
    # where nothing can tell them) and stamps (what the page polls elsewhere).
    pending = world.hostile["pending"]
    yield Page("dashboard live", f"{base}dashboard/live/", VIEW_JOB, shown=_streams())
    yield Page("dashboard live stamp", f"{base}dashboard/live/stamp/", VIEW_JOB)
    yield Page("job live", f"{base}{pending.pk}/live/", VIEW_JOB, shown=_streams())
    yield Page("job live stamp", f"{base}{pending.pk}/live/stamp/", VIEW_JOB)
    yield Page("cleanup", f"{base}cleanup/", frozenset({"cleanup_job"}), ("kind",))


DASHBOARD_TOKENS = ("kind", "queue", "schedule", "paused", "pauser", "workerid", "wqueue")


def _changelists(world: World) -> Iterator[Page]:
    jobs = f"/admin/{APP}/job/"
    listed = ("kind", "queue", "claimer", "paused")
    yield Page("job changelist", jobs, VIEW_JOB, listed)
    for label, query, shows in (
        ("search", {"q": hostile("q")}, ("q",)),
        ("search by kind", {"q": HOSTILE_KIND}, ("kind", "queue")),
        ("filters", {"kind": HOSTILE_KIND, "queue": world.hostile["pending"].queue}, listed),
        ("unknown filter values", {"kind": hostile("fkind"), "queue": hostile("fq")}, ()),
        ("date range", {"created_at__range__gte_0": hostile("range")}, ("range",)),
    ):
        url = f"{jobs}?{urlencode(query)}"
        yield Page(f"job changelist {label}", url, VIEW_JOB, shows, roles=False)
    journal = f"/admin/{APP}/journalentry/"
    entry = ("kind", "note", "akey", "attach", "worker", "actor")
    # The changelist folds the attachment to its first 80 characters: its key shows.
    yield Page(
        "journal changelist", journal, VIEW_JOURNAL, tuple(t for t in entry if t != "attach")
    )
    # An unknown kind lists nothing; an unknown outcome is refused with a message naming
    # the outcomes (tests/admin/test_filter_parameters.py: escaped there too).
    unknown = urlencode({"kind": hostile("jkind")})
    yield Page(
        "journal changelist unknown filter values",
        f"{journal}?{unknown}",
        VIEW_JOURNAL,
        roles=False,
    )
    e = world.entry.pk
    yield Page("journal change", f"{journal}{e}/change/", VIEW_JOURNAL, entry)
    yield Page("journal history", f"{journal}{e}/history/", VIEW_JOURNAL)
    yield Page("journal delete", f"{journal}{e}/delete/", None)
    yield Page("journal add", f"{journal}add/", None)


WORKFLOW_VIEW = frozenset({"view_workflow"})
WORKFLOW_ACTS = {"cancel": "cancel_workflow", "retry_dead": "requeue_job"}


def _streams() -> int:
    from django_jobqueue.store import listening

    return 200 if listening.supported() else 204


def _workflow_pages(world: World) -> Iterator[Page]:
    base = f"/admin/{APP}/workflow/"
    shown = world.workflows["shown"]
    yield Page("workflow changelist", base, WORKFLOW_VIEW, ("wfname",))
    search = f"{base}?{urlencode({'q': hostile('wfq')})}"
    yield Page("workflow changelist search", search, WORKFLOW_VIEW, ("wfq",), roles=False)
    yield Page("workflow change", f"{base}{shown.pk}/change/", WORKFLOW_VIEW, ("wfname", "step"))
    yield Page("workflow history", f"{base}{shown.pk}/history/", WORKFLOW_VIEW)
    yield Page("workflow live", f"{base}{shown.pk}/live/", WORKFLOW_VIEW, shown=_streams())
    yield Page("workflow live stamp", f"{base}{shown.pk}/live/stamp/", WORKFLOW_VIEW)
    yield Page("workflow delete", f"{base}{shown.pk}/delete/", None)
    yield Page("workflow add", f"{base}add/", None)
    for name, perm in WORKFLOW_ACTS.items():
        target = world.workflows[name]
        needs = frozenset({"view_workflow", perm})
        yield Page(f"workflow act {name}", f"{base}{target.pk}/act/{name}/", needs)
    step = Job.objects.filter(workflow=shown).order_by("id").first() if shown.pk else None
    yield Page(
        "job change [workflow step]",
        f"/admin/{APP}/job/{step.pk if step else '0'}/change/",
        VIEW_JOB,
        ("wfname", "step", "child"),
        roles=False,
    )


def pages(world: World) -> list[Page]:
    """Every GET page of the app's admin (and the two index pages above it)."""
    return [
        Page("admin index", "/admin/", frozenset()),
        # Listed for any model the user may view or delete (Django's get_model_perms).
        Page("app index", f"/admin/{APP}/", LISTED, any_of=True, refused=404),
        *_job_pages(world),
        *_changelists(world),
        *_workflow_pages(world),
    ]


def page_keys(*, roles: bool = False) -> list[str]:
    """The pages' keys without a world, for test ids (the same list, in order); with
    ``roles``, those of the role matrix only."""
    fake = SimpleNamespace(pk="0", queue="q")
    no_wf = SimpleNamespace(pk=None)
    stand_in = SimpleNamespace(
        hostile=dict.fromkeys(JOB_TOKENS, fake),
        entry=fake,
        workflows=dict.fromkeys(["shown", *WORKFLOW_ACTS], no_wf),
    )
    return [p.key for p in pages(cast(World, stand_in)) if p.roles or not roles]


# --- POST endpoints -----------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A POST that changes something: its URL and form, the permissions it needs (None:
    no one) and how to tell that it did its change."""

    key: str
    url: Callable[[World], str]
    data: Callable[[World], dict[str, Any]]
    needs: frozenset[str] | None
    done: Callable[[World], bool] = field(default=lambda w: False)


def _gone(name: str) -> Callable[[World], bool]:
    return lambda w: not Job.objects.filter(id=w.targets[name].id).exists()


def _status(name: str, status: str) -> Callable[[World], bool]:
    return lambda w: Job.objects.get(id=w.targets[name].id).status == status


def _run_now_done(w: World) -> bool:
    return Job.objects.get(id=w.targets["run_now"].id).visible_at <= timezone.now()


DONE: dict[str, Callable[[World], bool]] = {
    "requeue": _status("requeue", "pending"),
    "cancel": _status("cancel", "cancelled"),
    "terminate": _status("terminate", "cancelled"),  # a pending job: cancelled at once
    "run_now": _run_now_done,
    "delete_selected": _gone("delete_selected"),
}


def cleanup_data(ago: timedelta, **extra: Any) -> dict[str, Any]:
    """The clean-up form for jobs finished more than ``ago`` ago (every finished status)."""
    before = timezone.localtime(timezone.now() - ago)
    return {
        "finished_before_0": before.date().isoformat(),
        "finished_before_1": before.strftime("%H:%M:%S"),
        "statuses": list(TERMINAL),
        "kind": "",
        **extra,
    }


def confirmed(client: Client, data: dict[str, Any], *, count: int) -> dict[str, Any]:
    """``data`` with the confirmation the form's own count step hands back, once it has
    counted ``count`` jobs."""
    counted = client.post(f"/admin/{APP}/job/cleanup/", data)
    assert counted.status_code == 200
    assert counted.context["count"] == count
    return {**data, "confirm": counted.context["counted"]}


def cleanup_form(world: World) -> dict[str, Any]:
    """The confirmed clean-up of the old target (the one job finished that long ago)."""
    counter = Client()
    counter.force_login(world.users["superuser"])
    return confirmed(counter, cleanup_data(OLD / 2), count=1)


def _bulk_form(name: str) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"action": name, "_selected_action": [w.targets[name].pk], "post": "yes"}


def _act_url(name: str) -> Callable[[World], str]:
    return lambda w: f"/admin/{APP}/job/{w.targets[name].pk}/act/{name}/"


def _endpoints() -> Iterator[Endpoint]:
    base = f"/admin/{APP}/job/"
    for name, action in ACTIONS.items():
        needs = frozenset({"view_job", action.permission})
        yield Endpoint(f"bulk {name}", lambda w: base, _bulk_form(name), needs, DONE[name])
        yield Endpoint(f"act {name}", _act_url(name), lambda w: {"post": "yes"}, needs, DONE[name])
    yield Endpoint(
        "job delete",
        lambda w: f"{base}{w.targets['delete_selected'].pk}/delete/",
        lambda w: {"post": "yes"},
        frozenset({"delete_job"}),
        _gone("delete_selected"),
    )
    yield Endpoint(
        "cleanup",
        lambda w: f"{base}cleanup/",
        cleanup_form,
        frozenset({"cleanup_job"}),
        _gone("cleanup"),
    )
    yield Endpoint(
        "job rerun",
        lambda w: f"{base}{w.targets['rerun'].pk}/rerun/",
        lambda w: {"step": "s1"},
        frozenset({"view_job", "requeue_job"}),
        _status("rerun", "pending"),
    )
    pause = frozenset({"pause_queue"})
    queue = f"{base}dashboard/queue/"
    yield Endpoint(
        "queue pause",
        lambda w: queue,
        lambda w: {"queue": "default", "do": "pause"},
        pause,
        lambda w: "default" in paused(),
    )
    yield Endpoint(
        "queue resume",
        lambda w: queue,
        lambda w: {"queue": "reports", "do": "resume"},
        pause,
        lambda w: "reports" not in paused(),
    )
    yield Endpoint(
        "database select",
        lambda w: f"{base}database/",
        lambda w: {"database": "default", "next": f"{base}dashboard/"},
        VIEW_JOB,
        _database_chosen,
    )
    yield from _workflow_endpoints()
    yield from _refused_everywhere()


def _database_chosen(w: World) -> bool:
    """Some session now shows the chosen queue database (the selector's one change)."""
    from django.contrib.sessions.models import Session

    from django_jobqueue.admin.databases import SESSION_KEY

    return any(s.get_decoded().get(SESSION_KEY) == "default" for s in Session.objects.all())


def _step_status(name: str, step: str, status: str) -> Callable[[World], bool]:
    return lambda w: Job.objects.get(workflow=w.workflows[name], step_name=step).status == status


def _workflow_act_url(name: str) -> Callable[[World], str]:
    return lambda w: f"/admin/{APP}/workflow/{w.workflows[name].pk}/act/{name}/"


# What each workflow action's target shows once done: a step of it, in this status.
WORKFLOW_DONE = {"cancel": ("a", "cancelled"), "retry_dead": ("b", "pending")}


def _workflow_endpoints() -> Iterator[Endpoint]:
    base = f"/admin/{APP}/workflow/"
    for name, perm in WORKFLOW_ACTS.items():
        step, status = WORKFLOW_DONE[name]
        yield Endpoint(
            f"workflow {name}",
            _workflow_act_url(name),
            lambda w: {"post": "yes"},
            frozenset({"view_workflow", perm}),
            _step_status(name, step, status),
        )
    yield Endpoint(
        "workflow delete",
        lambda w: f"{base}{w.workflows['cancel'].pk}/delete/",
        lambda w: {"post": "yes"},
        None,
    )
    yield Endpoint("workflow add", lambda w: f"{base}add/", lambda w: {"name": "x"}, None)


def _refused_everywhere() -> Iterator[Endpoint]:
    """POSTs no one may make: jobs and journal entries are never added or edited here,
    journal entries never deleted (they go with their job), and the journal has no actions."""
    base = f"/admin/{APP}/job/"
    journal = f"/admin/{APP}/journalentry/"
    edit = {"kind": "tests.taskapp.tasks.add", "status": "dead", "payload": "{}"}
    yield Endpoint("job add", lambda w: f"{base}add/", lambda w: edit, None)
    yield Endpoint(
        "job change", lambda w: f"{base}{w.targets['cancel'].pk}/change/", lambda w: edit, None
    )
    yield Endpoint("journal add", lambda w: f"{journal}add/", lambda w: {"note": "x"}, None)
    yield Endpoint(
        "journal change",
        lambda w: f"{journal}{w.entry.pk}/change/",
        lambda w: {"note": "x", "outcome": "completed"},
        None,
    )
    yield Endpoint(
        "journal delete",
        lambda w: f"{journal}{w.entry.pk}/delete/",
        lambda w: {"post": "yes"},
        None,
    )
    yield Endpoint(
        "journal bulk delete",
        lambda w: journal,
        lambda w: {"action": "delete_selected", "_selected_action": [w.entry.pk], "post": "yes"},
        None,
    )


ENDPOINTS = list(_endpoints())
ENDPOINT_KEYS = [e.key for e in ENDPOINTS]
