"""The workflow list's bulk actions through the Django test client: retry the dead
steps of every selected failed workflow and cancel every selected running one, each
behind a confirmation page that counts what changes and what is skipped and why,
journalled per step with the operator as actor, logged per workflow, refused without
the permission."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client

from django_jobqueue.models import Job, JournalEntry, Workflow
from tests.admin.conftest import make_user
from tests.admin.test_workflow_actions import RUNNING, RUNNING_EDGES, statuses
from tests.admin.workflow_rows import chord, make_workflow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKFLOWS = "/admin/django_jobqueue/workflow/"


@pytest.fixture
def steerer() -> User:
    return make_user("sam", ["view_workflow", "view_job", "cancel_workflow", "requeue_job"])


def failed(name: str) -> Workflow:
    wf, _ = chord(name, 4, dead=1)
    Workflow.objects.filter(id=wf.id).update(status="failed", steps_open=0)
    return Workflow.objects.get(id=wf.id)


def post(client: Client, action: str, workflows: list[Workflow], **extra: str) -> object:
    data = {"action": action, "_selected_action": [str(w.id) for w in workflows], **extra}
    return client.post(WORKFLOWS, data, follow="post" in extra)


def test_retry_dead_steps_across_failed_workflows_confirms_then_journals_each_step(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    broken = [failed(f"album-{n}") for n in range(3)]
    running, _ = make_workflow("import-orders", RUNNING, RUNNING_EDGES)
    client = client_for(steerer)
    listing = client.get(WORKFLOWS).content.decode()
    assert 'value="bulk_retry_dead"' in listing
    assert 'value="bulk_cancel"' in listing
    page = post(client, "bulk_retry_dead", [*broken, running])
    text = page.content.decode()  # type: ignore[attr-defined]
    assert "Retry dead steps will change 3 workflows</strong> and skip 1" in text
    assert "1: it has no dead step" in text
    assert not JournalEntry.objects.exists()  # nothing before the confirmation
    done = post(client, "bulk_retry_dead", [*broken, running], post="yes")
    messages = [str(m) for m in done.context["messages"]]  # type: ignore[attr-defined]
    assert "Retry dead steps: 3 workflows. Skipped 1." in messages
    for wf in broken:
        assert statuses(wf)["m0"] == "pending"
        assert statuses(wf)["callback"] == "waiting"  # re-armed
        assert Workflow.objects.get(id=wf.id).status == "running"
        requeued = JournalEntry.objects.filter(job__workflow=wf, outcome="requeued")
        assert requeued.exists()
        assert {e.actor for e in requeued} == {"admin:sam"}
        assert LogEntry.objects.filter(object_id=str(wf.id), change_message__contains="Retry")
    assert statuses(running) == RUNNING


def test_retry_dead_steps_of_every_workflow_the_filter_matches(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    broken = [failed(f"album-{n}") for n in range(3)]
    make_workflow("import-orders", RUNNING, RUNNING_EDGES)  # running: not matched
    client = client_for(steerer)
    url = f"{WORKFLOWS}?status__exact=failed"
    data = {
        "action": "bulk_retry_dead",
        "select_across": "1",
        "_selected_action": str(broken[0].id),
    }
    text = client.post(url, data).content.decode()
    assert "Retry dead steps will change 3 workflows</strong>" in text
    assert 'name="select_across" value="1"' in text
    form = text.split('id="content-main"')[1]
    assert form.count('name="_selected_action"') == 1  # the filter says which, not ids
    posted = re.search(r'name="_selected_action" value="([^"]+)"', form)
    assert posted is not None
    done = client.post(
        url,
        {
            "action": "bulk_retry_dead",
            "select_across": "1",
            "_selected_action": posted.group(1),
            "post": "yes",
        },
    )
    assert done.status_code == 302
    for wf in broken:
        assert Workflow.objects.get(id=wf.id).status == "running"


def test_cancel_across_workflows_skips_the_finished_ones_saying_why(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    one, _ = make_workflow("one", RUNNING, RUNNING_EDGES)
    two, _ = make_workflow("two", RUNNING, RUNNING_EDGES)
    done_wf = failed("album")
    client = client_for(steerer)
    text = post(client, "bulk_cancel", [one, two, done_wf]).content.decode()  # type: ignore[attr-defined]
    assert "Cancel workflow will change 2 workflows</strong> and skip 1" in text
    assert "only a running workflow can be cancelled" in text
    post(client, "bulk_cancel", [one, two, done_wf], post="yes")
    for wf in (one, two):
        assert statuses(wf)["c"] == "cancelled"
        cancelled = JournalEntry.objects.filter(job__workflow=wf, outcome="cancelled")
        assert {e.actor for e in cancelled} == {"admin:sam"}
    assert not JournalEntry.objects.filter(job__workflow=done_wf).exists()


def test_bulk_actions_need_their_permission(client_for: Callable[..., Client]) -> None:
    looker = make_user("lou", ["view_workflow", "view_job"])
    wf = failed("album")
    client = client_for(looker)
    assert 'value="bulk_retry_dead"' not in client.get(WORKFLOWS).content.decode()
    before = statuses(wf)
    post(client, "bulk_retry_dead", [wf], post="yes")
    assert statuses(wf) == before
    assert not JournalEntry.objects.exists()
    assert Job.objects.filter(workflow=wf, status="dead").exists()


def test_the_workflow_list_draws_its_badges_with_the_jobs_lists_styles(
    steerer: User, client_for: Callable[..., Client]
) -> None:
    failed("album")
    client = client_for(steerer)
    workflows = client.get(WORKFLOWS).content.decode()
    jobs = client.get("/admin/django_jobqueue/job/").content.decode()
    rule = ".jq-badge { display:inline-block;"
    assert rule in jobs
    assert rule in workflows
    assert '<span class="jq-badge" style="background:#cf222e">failed</span>' in workflows
    assert '<span class="jq-badge" style="background:#cf222e">dead</span>' in jobs
