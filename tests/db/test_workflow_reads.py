"""What operators read of workflows outside the admin: ``jobqueue workflows`` and
``jobqueue workflow ID`` (tables and JSON), and ``stats`` counting waiting steps apart
from pending ones (the dashboard's card as well)."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from django_jobqueue import store
from django_jobqueue.models import Job
from tests.admin.workflow_rows import chord, make_workflow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

DIAMOND = {"fetch": "completed", "left": "completed", "right": "dead", "report": "cancelled"}
DIAMOND_EDGES = [("fetch", "left"), ("fetch", "right"), ("left", "report"), ("right", "report")]


def jobqueue(*args: str) -> str:
    out = StringIO()
    call_command("jobqueue", *args, stdout=out)
    return out.getvalue()


def test_workflows_lists_newest_first_with_progress_and_filters_by_status() -> None:
    failed, _ = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES, status="failed")
    running, _ = make_workflow("nightly", {"a": "completed", "b": "pending"}, [("a", "b")])
    lines = jobqueue("workflows").splitlines()
    assert lines[0].split() == [
        "ID", "NAME", "SHAPE", "STATUS", "DONE/TOTAL", "DEAD", "CREATED", "FINISHED"
    ]  # fmt: skip
    assert [line.split()[1] for line in lines[1:]] == ["nightly", "import-orders"]
    assert lines[1].split()[2:6] == ["workflow", "running", "1/2", "0"]
    assert lines[2].split()[2:6] == ["workflow", "failed", "4/4", "1"]
    only = jobqueue("workflows", "--status", "failed", "--json")
    [row] = json.loads(only)
    assert row["id"] == str(failed.id)
    assert (row["steps_total"], row["steps_done"], row["steps_dead"]) == (4, 4, 1)
    assert jobqueue("workflows", "--status", "cancelled") == "No workflows match.\n"
    assert str(running.id) in jobqueue("workflows", "--limit", "1")
    assert str(failed.id) not in jobqueue("workflows", "--limit", "1")


def test_workflow_shows_each_step_with_its_status_and_parents() -> None:
    wf, steps = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES, status="failed")
    text = jobqueue("workflow", str(wf.id))
    assert "name:         import-orders" in text
    assert "steps:        4/4 done, 1 dead" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines()[8:]}
    assert rows["fetch"][2:] == ["completed", "completed", "-"]
    assert rows["right"][2:] == ["dead", "completed", "fetch"]
    assert rows["report"][2:] == ["cancelled", "completed", "left,", "right"]
    shown = json.loads(jobqueue("workflow", str(wf.id), "--json"))
    by_name = {s["name"]: s for s in shown["steps"]}
    assert by_name["report"]["parents"] == ["left", "right"]
    assert by_name["right"]["id"] == str(steps["right"].id)
    assert shown["steps_complete"] is True


def test_workflow_refuses_an_unknown_id_and_text_that_is_no_id() -> None:
    with pytest.raises(CommandError, match="No workflow with id"):
        jobqueue("workflow", str(uuid.uuid4()))
    with pytest.raises(CommandError, match="not a workflow id"):
        jobqueue("workflow", "nope")
    with pytest.raises(CommandError, match="invalid choice"):
        jobqueue("workflows", "--status", "waiting")


def test_stats_and_the_dashboard_count_waiting_steps_apart_from_pending_ones() -> None:
    chord("album", 3)  # three completed members, the callback waiting
    make_workflow("nightly", {"a": "pending", "b": "waiting", "c": "waiting"}, [("a", "b")])
    Job.objects.create(kind="tests.taskapp.tasks.add", payload={"a": 1, "b": 2})
    s = store.stats()
    assert s.waiting == 3
    assert s.pending_total == 2  # the plain job and the nightly root: no waiting step
    assert s.to_dict()["waiting"] == 3
    text = jobqueue("stats")
    assert "Pending (runnable now): 2" in text
    assert "Waiting for their parents (workflow steps, not backlog): 3" in text
    admin = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)
    cards = [
        card[:3] for card in client.get("/admin/django_jobqueue/job/dashboard/").context["cards"]
    ]
    assert ("waiting (workflow steps)", "3", "waiting") in cards
    assert ("pending now", "2", "pending") in cards
    metrics = client.get("/metrics/").content.decode()
    assert "\njobqueue_waiting_steps 3.0\n" in metrics
