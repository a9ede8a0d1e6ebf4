"""The red-team suite's shared ground: hostile strings and how to spot one unescaped, the
roles an attacker can hold, and one world of data per module (hostile values in every
field a page shows, plus a target job for each operator action).

The world is built once per module inside a transaction that is rolled back when the
module ends; each test runs in a savepoint inside it (pytest-django's ``django_db``), so
a test that changes something changes it for itself only, and no test needs
``transaction=True``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.utils import timezone

from django_jobqueue import pause_queue, periodic, set_limit, task
from django_jobqueue.models import (
    Job,
    JournalEntry,
    QueuePause,
    StepEdge,
    StepRecord,
    WorkerHeartbeat,
    Workflow,
)
from tests.taskapp import tasks

# --- hostile strings ----------------------------------------------------------------------

JS_URL = "javascript:alert('xss-url')"


def hostile(where: str) -> str:
    """A value that runs script if a page prints it raw, carrying a token (``xss-<where>``)
    that survives escaping: a page that shows the token shows the field."""
    return f"<script>alert('xss-{where}')</script>\"><img src=x onerror=alert('xss-{where}')>"


_DANGER = re.compile(
    r"<script>alert|<img src=x|"
    r"(?:href|src|action|formaction)\s*=\s*[\"']?\s*javascript:",
    re.IGNORECASE,
)


def unescaped(text: str) -> list[str]:
    """Each hostile fragment ``text`` holds raw (as markup, not as escaped text)."""
    return [m.group(0) for m in _DANGER.finditer(text)]


def assert_safe(text: str, *tokens: str) -> None:
    """``text`` shows each ``xss-<token>`` (so the field was rendered) and nothing raw."""
    assert unescaped(text) == []
    missing = [t for t in tokens if f"xss-{t}" not in text]
    assert missing == [], f"fields not shown on the page: {missing}"


# --- roles --------------------------------------------------------------------------------

# The queue's own permissions: Django's delete, and the operator permissions the model
# declares (one per admin action, the clean-up and queue pause).
JOB_PERMS = ("delete_job", *(codename for codename, _ in Job._meta.permissions))
VIEW = ("view_job", "view_journalentry")
# The workflows' own: viewing them, and cancelling one (retrying dead steps is requeue_job).
WORKFLOW_PERMS = ("view_workflow", *(codename for codename, _ in Workflow._meta.permissions))
EVERY = (*VIEW, *JOB_PERMS, *WORKFLOW_PERMS)


@dataclass(frozen=True)
class Role:
    name: str
    perms: frozenset[str] = frozenset()
    staff: bool = True
    active: bool = True
    superuser: bool = False
    anonymous: bool = False

    @property
    def admitted(self) -> bool:
        """Whether the admin lets this user in at all (Django's ``has_permission``)."""
        return not self.anonymous and self.staff and self.active

    def may(self, needs: frozenset[str] | None) -> bool:
        """Whether the role holds every permission ``needs`` names (None: no one may)."""
        if needs is None or not self.admitted:
            return False
        return self.superuser or needs <= self.perms


def _roles() -> list[Role]:
    roles = [
        Role("anonymous", anonymous=True),
        Role("non-staff with every permission", frozenset(EVERY), staff=False),
        Role("inactive staff with every permission", frozenset(EVERY), active=False),
        Role("staff without permissions"),
        Role("view-only staff", frozenset(VIEW)),
    ]
    for perm in JOB_PERMS:
        roles.append(Role(f"staff with only {perm}", frozenset({perm})))
        roles.append(Role(f"view-only staff with {perm}", frozenset({*VIEW, perm})))
    roles.append(Role("workflow viewer", frozenset({"view_workflow"})))
    roles.append(Role("workflow operator", frozenset({*WORKFLOW_PERMS, "requeue_job"})))
    roles.append(Role("operator", frozenset(EVERY)))
    roles.append(Role("superuser", superuser=True))
    return roles


ROLES = _roles()


def make_user(role: Role, username: str | None = None) -> User:
    user = User.objects.create_user(
        username or role.name.replace(" ", "-")[:150],
        password="pw",
        is_staff=role.staff,
        is_active=role.active,
        is_superuser=role.superuser,
    )
    user.user_permissions.set(Permission.objects.filter(codename__in=role.perms))
    return user


# --- the world ----------------------------------------------------------------------------

HOSTILE_KIND = hostile("kind")
HOSTILE_QUEUE = hostile("queue")
PAUSED_QUEUE = hostile("paused")
OLD = timedelta(days=10)  # the clean-up target finished this long ago
DAY = timedelta(days=1)  # the finished hostile jobs, this long ago

# SQL metacharacters and LIKE wildcards: each is some job's dedup key, kind and queue, so
# a search or a filter for it must find exactly that job (and a wildcard nothing more).
META = (
    "' OR 1=1 --",
    "%",
    "_",
    "\\",
    "%' OR '1'='1",
    "'; DROP TABLE django_jobqueue_job; --",
    '" OR ""="',
    "*",
    "1 UNION SELECT password FROM auth_user --",
    "0190abcd' --",
)


@dataclass
class World:
    hostile: dict[str, Job]  # jobs whose every shown field is hostile, by state
    targets: dict[str, Job]  # one job per operator action, in a state that allows it
    entry: JournalEntry  # a hostile journal entry (of the dead hostile job)
    keyed: dict[str, Job] = field(default_factory=dict)  # by META value: its dedup key
    users: dict[str, User] = field(default_factory=dict)  # by role name
    xss_user: User | None = None  # a superuser whose username is hostile too
    sessions: dict[str, str] = field(default_factory=dict)  # session keys, by role name
    # "shown": hostile names in every field its pages show; "cancel" (running) and
    # "retry_dead" (failed, a dead step): the targets of the workflow actions.
    workflows: dict[str, Workflow] = field(default_factory=dict)

    def client(self, role: Role, *, csrf: bool = False) -> Client:
        """A browser logged in as ``role`` (its session made once, with the world)."""
        client = Client(enforce_csrf_checks=csrf)
        if not role.anonymous:
            client.cookies[settings.SESSION_COOKIE_NAME] = self.sessions[role.name]
        return client

    def log_in_everyone(self) -> None:
        for name, user in self.users.items():
            client = Client()
            client.force_login(user)
            self.sessions[name] = client.cookies[settings.SESSION_COOKIE_NAME].value


def _hostile_task() -> Any:
    @task(kind=HOSTILE_KIND)
    def hostile_task(data: dict[str, Any]) -> None:
        return None

    # A schedule named with a hostile name, and a limit on the hostile kind.
    periodic(hostile_task, "@daily", name=hostile("schedule"), kwargs={"data": {}})
    set_limit(HOSTILE_KIND, max_in_flight=5, actor=hostile("limiter"))
    return hostile_task


def _hostile_jobs(hostile_task: Any) -> dict[str, Job]:
    now = timezone.now()
    data = {hostile("pkey"): hostile("pvalue"), "url": JS_URL}
    made = {}
    for state in ("pending", "scheduled", "claimed", "completed", "dead"):
        options: dict[str, Any] = {"queue": HOSTILE_QUEUE}
        if state == "pending":
            options["idempotency_key"] = hostile("idem")
        if state == "scheduled":
            options["delay"] = timedelta(hours=1)
        made[state] = hostile_task.using(**options).enqueue(data).id
    Job.objects.filter(id=made["pending"]).update(
        dedup_key=hostile("dedup"), carry={hostile("ckey"): hostile("carry")}
    )
    lease = {"claim_expires_at": now + timedelta(minutes=5), "run_count": 1}
    Job.objects.filter(id=made["claimed"]).update(
        status="claimed",
        claimed_by=hostile("claimer"),
        cancel_requested=True,
        cancel_actor=hostile("canceller"),
        **lease,
    )
    Job.objects.filter(id=made["completed"]).update(
        status="completed", finished_at=now - DAY, run_count=1, result={"r": hostile("result")}
    )
    Job.objects.filter(id=made["dead"]).update(status="dead", finished_at=now - DAY, run_count=1)
    return {name: Job.objects.get(id=job_id) for name, job_id in made.items()}


def _hostile_entry(job: Job) -> JournalEntry:
    return JournalEntry.objects.create(
        job=job,
        kind=job.kind,
        run_no=1,
        outcome="dead",
        started_at=timezone.now(),
        duration=timedelta(milliseconds=3),
        note=f"{hostile('note')}\nTraceback (most recent call last):\n  {hostile('traceback')}",
        attachment={hostile("akey"): hostile("attach")},
        worker=hostile("worker"),
        actor=hostile("actor"),
    )


def _targets() -> dict[str, Job]:
    """A job for each action, in the state it applies to; and one for the clean-up."""
    now = timezone.now()
    made = {
        "requeue": tasks.add.enqueue(2, 1).id,
        "cancel": tasks.add.enqueue(2, 2).id,
        "terminate": tasks.add.enqueue(2, 7).id,  # pending: terminate cancels it at once
        "run_now": tasks.add.using(delay=timedelta(hours=1)).enqueue(2, 3).id,
        "delete_selected": tasks.add.enqueue(2, 4).id,
        "cleanup": tasks.add.enqueue(2, 5).id,
        "rerun": tasks.add.enqueue(2, 6).id,
    }
    # The re-run's target: dead, with one recorded step to re-run from.
    Job.objects.filter(id=made["rerun"]).update(status="dead", finished_at=now, run_count=1)
    StepRecord.objects.create(
        job_id=made["rerun"], record={"kind": "step", "name": "s1", "result": 1, "seq": 0}, size=50
    )
    Job.objects.filter(id=made["requeue"]).update(status="dead", finished_at=now, run_count=1)
    Job.objects.filter(id=made["delete_selected"]).update(
        status="completed", finished_at=now, run_count=1
    )
    Job.objects.filter(id=made["cleanup"]).update(
        status="completed", finished_at=now - OLD, run_count=1
    )
    return {name: Job.objects.get(id=job_id) for name, job_id in made.items()}


def _keyed() -> dict[str, Job]:
    """A job per META value, of a kind and in a queue of that name, with it as its key."""
    made = {}
    for value in META:

        @task(kind=value)
        def meta_task() -> None:
            return None

        job_id = meta_task.using(queue=value[:100]).enqueue().id
        Job.objects.filter(id=job_id).update(dedup_key=value)
        made[value] = Job.objects.get(id=job_id)
    return made


def _surroundings(world: World) -> None:
    """Hostile values outside the jobs table: a paused queue, a worker, a log entry."""
    pause_queue(PAUSED_QUEUE, actor=hostile("pauser"))
    pause_queue("reports", actor="ops")  # a plain paused queue, for the resume endpoint
    WorkerHeartbeat.objects.create(
        id=hostile("workerid"),
        host=hostile("host"),
        pid=1,
        queues=[hostile("wqueue")],
        kinds=[HOSTILE_KIND],
        concurrency=1,
    )
    assert world.xss_user is not None
    LogEntry.objects.create(
        user=world.xss_user,
        content_type=ContentType.objects.get_for_model(Job),
        object_id=str(world.hostile["dead"].id),
        object_repr=hostile("repr"),
        action_flag=CHANGE,
        change_message=hostile("logmsg"),
    )


def _workflow(name: str, steps: dict[str, str], status: str, kind: str) -> Workflow:
    """A workflow whose steps run one after another, written through the ORM."""
    now = timezone.now()
    done = ("completed", "dead", "cancelled")
    wf = Workflow.objects.create(
        name=name,
        status=status,
        steps_total=len(steps),
        steps_open=sum(1 for s in steps.values() if s not in done),
        steps_dead=sum(1 for s in steps.values() if s == "dead"),
        finished_at=None if status == "running" else now,
    )
    made = [
        Job.objects.create(
            kind=kind,
            payload={"data": {}},
            workflow=wf,
            step_name=step,
            status=state,
            run_count=int(state in done),
            finished_at=now if state in done else None,
        )
        for step, state in steps.items()
    ]
    for parent, child in itertools.pairwise(made):
        StepEdge.objects.create(workflow=wf, parent=parent, child=child)
    return wf


def _workflows() -> dict[str, Workflow]:
    shown = {hostile("step"): "completed", hostile("child"): "waiting"}
    return {
        "shown": _workflow(hostile("wfname"), shown, "running", HOSTILE_KIND),
        "cancel": _workflow("to-cancel", {"a": "pending", "b": "waiting"}, "running", KIND),
        "retry_dead": _workflow("to-retry", {"a": "completed", "b": "dead"}, "failed", KIND),
    }


KIND = "tests.taskapp.tasks.add"


def build_world() -> World:
    hostile_task = _hostile_task()
    jobs = _hostile_jobs(hostile_task)
    world = World(hostile=jobs, targets=_targets(), entry=_hostile_entry(jobs["dead"]))
    world.keyed = _keyed()
    world.workflows = _workflows()
    world.users = {role.name: make_user(role) for role in ROLES if not role.anonymous}
    world.log_in_everyone()
    world.xss_user = make_user(Role("xss", superuser=True), username=hostile("user")[:150])
    _surroundings(world)
    return world


def fingerprint() -> tuple[Any, ...]:
    """Everything an endpoint could change: each job's state, the journal, paused
    queues and the admin's log. Equal before and after means nothing changed."""
    jobs = tuple(
        Job.objects.order_by("id").values_list(
            "id", "status", "visible_at", "run_count", "failure_count", "cancel_requested"
        )
    )
    return (
        jobs,
        JournalEntry.objects.count(),
        StepRecord.objects.count(),
        tuple(QueuePause.objects.order_by("queue").values_list("queue", "paused_by")),
        LogEntry.objects.count(),
    )


def paused() -> set[str]:
    return set(QueuePause.objects.values_list("queue", flat=True))
