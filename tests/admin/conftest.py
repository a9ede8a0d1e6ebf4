"""Admin fixtures: an operator with every queue permission, one who may only look, and
jobs in each state (made through the public API and the storage layer, as in life)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from django_jobqueue.models import Job

OPERATOR_PERMS = [
    "view_job",
    "delete_job",
    "requeue_job",
    "cancel_job",
    "run_job_now",
    "cleanup_job",
    "pause_queue",
    "view_journalentry",
]


def make_user(username: str, codenames: list[str]) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def operator() -> User:
    return make_user("olga", OPERATOR_PERMS)


@pytest.fixture
def viewer() -> User:
    return make_user("vic", ["view_job", "view_journalentry"])


@pytest.fixture
def client_for() -> Callable[..., Client]:
    def login(user: User, *, csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=csrf)
        client.force_login(user)
        return client

    return login


def set_state(job_id: Any, **fields: Any) -> Job:
    """Put a job straight into a state (a test's shortcut for a worker's settlement)."""
    Job.objects.filter(id=job_id).update(**fields)
    return Job.objects.get(id=job_id)


def jobs_in_every_state() -> dict[str, Job]:
    """One job per state an action cares about, keyed by a name for the state."""
    from datetime import timedelta

    from django.utils import timezone

    from tests.taskapp import tasks

    now = timezone.now()
    made = {
        "pending": tasks.add.enqueue(1, 1).id,
        "scheduled": tasks.add.using(delay=timedelta(hours=1)).enqueue(1, 2).id,
        "claimed": tasks.add.enqueue(1, 3).id,
        "stopping": tasks.add.enqueue(1, 4).id,
        "completed": tasks.add.enqueue(1, 5).id,
        "dead": tasks.add.enqueue(1, 6).id,
        "cancelled": tasks.add.enqueue(1, 7).id,
    }
    lease = {"claimed_by": "w:1", "claim_expires_at": now + timedelta(minutes=5), "run_count": 1}
    set_state(made["claimed"], status="claimed", **lease)
    set_state(made["stopping"], status="claimed", cancel_requested=True, **lease)
    for name in ("completed", "dead", "cancelled"):
        set_state(made[name], status=name, finished_at=now, run_count=1)
    return {name: Job.objects.get(id=job_id) for name, job_id in made.items()}
