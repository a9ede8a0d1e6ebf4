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
