"""The workflow page's actions through the Django test client: cancel a workflow and
retry its dead steps, each confirmed by a POST with Django's CSRF token, refused (403,
nothing changed) without its permission, journalled per step by the store and logged."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client

from django_jobqueue.models import Job, JournalEntry, Workflow
from tests.admin.conftest import make_user
from tests.admin.workflow_rows import chord, make_workflow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKFLOWS = "/admin/django_jobqueue/workflow/"
RUNNING = {"a": "completed", "b": "claimed", "c": "pending", "d": "waiting"}
RUNNING_EDGES = [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]


def statuses(wf: Workflow) -> dict[str, str]:
    return dict(Job.objects.filter(workflow=wf).values_list("step_name", "status"))


@pytest.fixture
def steerer() -> User:
    return make_user("sam", ["view_workflow", "view_job", "cancel_workflow", "requeue_job"])


@pytest.fixture
def looker() -> User:
    return make_user("lou", ["view_workflow", "view_job"])


def test_cancel_confirms_then_cancels_every_unfinished_step_journalled_and_logged(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    wf, steps = make_workflow("import-orders", RUNNING, RUNNING_EDGES)
    client = client_for(steerer)
    page = client.get(f"{WORKFLOWS}{wf.id}/change/").content.decode()
    assert f'href="{WORKFLOWS}{wf.id}/act/cancel/"' in page
    assert f"{WORKFLOWS}{wf.id}/act/retry_dead/" not in page  # no dead step
    confirm = client.get(f"{WORKFLOWS}{wf.id}/act/cancel/")
    assert confirm.status_code == 200
    assert statuses(wf) == RUNNING  # nothing changed before the confirmation
    done = client.post(f"{WORKFLOWS}{wf.id}/act/cancel/", {"post": "yes"}, follow=True)
    assert done.status_code == 200
    assert any("Cancelled workflow import-orders" in str(m) for m in done.context["messages"])
    assert statuses(wf) == {"a": "completed", "b": "claimed", "c": "cancelled", "d": "cancelled"}
    assert Job.objects.get(id=steps["b"].id).cancel_requested  # asked to stop
    entries = JournalEntry.objects.filter(job__workflow=wf, outcome="cancelled")
    assert sorted(e.job_id for e in entries) == sorted([steps["c"].id, steps["d"].id])
    assert {e.actor for e in entries} == {"admin:sam"}
    assert LogEntry.objects.filter(object_id=str(wf.id), change_message__contains="Cancel").exists()
    assert Workflow.objects.get(id=wf.id).cancel_requested


def test_retry_dead_steps_requeues_them_and_rearms_the_callback_their_death_cancelled(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    wf, steps = chord("album", 5, dead=2)
    Workflow.objects.filter(id=wf.id).update(status="failed", steps_open=0)
    client = client_for(steerer)
    page = client.get(f"{WORKFLOWS}{wf.id}/change/").content.decode()
    assert f'href="{WORKFLOWS}{wf.id}/act/retry_dead/"' in page
    assert f"{WORKFLOWS}{wf.id}/act/cancel/" not in page  # not running
    client.post(f"{WORKFLOWS}{wf.id}/act/retry_dead/", {"post": "yes"})
    now = statuses(wf)
    assert (now["m0"], now["m1"], now["m2"]) == ("pending", "pending", "completed")
    assert now["callback"] == "waiting"  # re-armed: it waits for the retried members
    requeued = JournalEntry.objects.filter(job__workflow=wf, outcome="requeued")
    assert {e.job_id for e in requeued} >= {steps["m0"].id, steps["m1"].id, steps["callback"].id}
    assert {e.actor for e in requeued} == {"admin:sam"}
    assert Workflow.objects.get(id=wf.id).status == "running"
    assert LogEntry.objects.filter(object_id=str(wf.id), change_message__contains="Retry").exists()


@pytest.mark.parametrize("name", ["cancel", "retry_dead"])
def test_an_action_without_its_permission_is_refused_and_changes_nothing(
    name: str, looker: User, client_for: Callable[..., Client]
) -> None:
    steps = {**RUNNING, "e": "dead"}
    wf, _ = make_workflow("import-orders", steps, [*RUNNING_EDGES, ("a", "e")])
    client = client_for(looker)
    assert f"/act/{name}/" not in client.get(f"{WORKFLOWS}{wf.id}/change/").content.decode()
    assert client.get(f"{WORKFLOWS}{wf.id}/act/{name}/").status_code == 403
    assert client.post(f"{WORKFLOWS}{wf.id}/act/{name}/", {"post": "yes"}).status_code == 403
    assert statuses(wf) == steps
    assert not JournalEntry.objects.filter(job__workflow=wf).exists()
    assert not LogEntry.objects.exists()


def test_an_action_needs_the_csrf_token_and_a_refused_one_says_why(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    wf, _ = make_workflow("import-orders", RUNNING, RUNNING_EDGES)
    forged = client_for(steerer, csrf=True)
    assert forged.post(f"{WORKFLOWS}{wf.id}/act/cancel/", {"post": "yes"}).status_code == 403
    assert statuses(wf) == RUNNING
    client = client_for(steerer)
    done = client.post(f"{WORKFLOWS}{wf.id}/act/retry_dead/", {"post": "yes"}, follow=True)
    assert any("it has no dead step" in str(m) for m in done.context["messages"])
    assert statuses(wf) == RUNNING
    assert client.get(f"{WORKFLOWS}{wf.id}/act/nothing/").status_code == 404
