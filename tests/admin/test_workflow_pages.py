"""The workflows changelist, the workflow page and its graph, and a step's job page,
through the Django test client, on workflows written through the ORM."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from django_jobqueue.admin import workflows
from django_jobqueue.admin.common import COLOURS, short_id
from django_jobqueue.admin.graph import NODE_CAP
from django_jobqueue.models import Job
from tests.admin.conftest import OPERATOR_PERMS, make_user
from tests.admin.workflow_rows import chord, make_workflow
from tests.db.test_stored_values import TOO_DEEP, write_raw

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKFLOWS = "/admin/django_jobqueue/workflow/"
JOBS = "/admin/django_jobqueue/job/"
XSS = "<script>alert(1)</script>"

DIAMOND = {"fetch": "completed", "left": "completed", "right": "dead", "report": "cancelled"}
DIAMOND_EDGES = [("fetch", "left"), ("fetch", "right"), ("left", "report"), ("right", "report")]


@pytest.fixture
def wf_viewer() -> User:
    return make_user("wendy", [*OPERATOR_PERMS, "view_workflow"])


def listed(client: Client, query: str = "") -> list[str]:
    page = client.get(WORKFLOWS + query)
    assert page.status_code == 200, page.status_code
    return [wf.name for wf in page.context["cl"].result_list]


def graph_nodes(text: str) -> list[str]:
    """The drawn nodes' classes and statuses, in document order."""
    return re.findall(r'<g class="jq-node (jq-step|jq-summary)" data-status="(\w*)"', text)


def test_changelist_shows_name_status_steps_done_of_total_and_times(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    wf, _ = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES, status="failed")
    make_workflow("nightly", {"a": "completed", "b": "pending"}, [("a", "b")])
    page = client_for(wf_viewer).get(WORKFLOWS)
    text = page.content.decode()
    assert page.status_code == 200
    assert short_id(wf.id) in text
    assert "import-orders" in text
    assert "nightly" in text
    assert "4 / 4" in text
    assert "(1 dead)" in text
    assert "1 / 2" in text
    assert text.count(f"background:{COLOURS['failed']}") >= 1


def test_changelist_filters_by_status_and_shape_and_searches_by_name_and_id(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    failed, _ = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES, status="failed")
    make_workflow("nightly", {"a": "completed", "b": "pending"}, [("a", "b")])
    chord("album", 3)
    client = client_for(wf_viewer)
    assert listed(client, "?status__exact=failed") == ["import-orders"]
    assert listed(client, "?shape__exact=chord") == ["album"]
    assert listed(client, "?q=nightly") == ["nightly"]
    assert listed(client, "?q=night") == []  # a name is matched exactly, not as a substring
    assert listed(client, f"?q={failed.id}") == ["import-orders"]
    assert listed(client, f"?q={short_id(failed.id)}") == ["import-orders"]
    assert client.get(WORKFLOWS + "?name__contains=x").status_code == 400  # not declared


def test_workflow_page_draws_each_step_as_a_node_coloured_by_status_linking_its_job(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    wf, steps = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES, status="failed")
    page = client_for(wf_viewer).get(f"{WORKFLOWS}{wf.id}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert '<svg class="jq-graph"' in text
    assert sorted(graph_nodes(text)) == sorted(("jq-step", s) for s in DIAMOND.values())
    for name, job in steps.items():
        assert f'href="{JOBS}{job.id}/change/"' in text, name
        assert f'fill="{COLOURS[DIAMOND[name]]}"' in text, name
    assert text.count('class="jq-edge"') == len(DIAMOND_EDGES)
    g = page.context["graph"]
    ys = {n["label"]: n["y"] for n in g["nodes"]}
    assert ys["fetch"] < ys["left"] == ys["right"] < ys["report"]  # parents above children
    assert f'{JOBS}?workflow={wf.id}&amp;status__exact=dead"' in text  # the counts link the steps


def test_a_chord_of_2000_members_is_drawn_under_the_node_cap_with_a_summary_by_status(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    wf, _steps = chord("album", 2000, dead=3)
    client = client_for(wf_viewer)
    page = client.get(f"{WORKFLOWS}{wf.id}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    nodes = graph_nodes(text)
    assert len(nodes) <= NODE_CAP
    assert nodes.count(("jq-summary", "")) == 1
    assert ("jq-step", "cancelled") in nodes  # the callback, drawn as itself
    [summary] = [n for n in page.context["graph"]["nodes"] if n["summary"]]
    assert summary["label"] == "2,000 steps"
    assert {b["status"]: b["count"] for b in summary["bars"]} == {"completed": 1997, "dead": 3}
    assert "1,997 completed, 3 dead" in summary["title"]
    # A summary's colour links list those steps: the job changelist filters by workflow.
    dead = next(b["url"] for b in summary["bars"] if b["status"] == "dead")
    assert dead.startswith(f"{JOBS}?workflow={wf.id}")
    shown = client.get(dead).context["cl"].result_list
    assert {j.step_name for j in shown} == {"m0", "m1", "m2"}


def test_a_chord_larger_than_the_graphs_read_still_draws_its_callback(
    wf_viewer: User, client_for: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 20,000-member chord's rule with a smaller read: a workflow with more steps
    than the page reads (GRAPH_READ_CAP) is drawn from its first steps and its last
    ones, so its callback is drawn, linked below its members' summary."""
    monkeypatch.setattr(workflows, "GRAPH_READ_CAP", 200)
    wf, steps = chord("album", 300, dead=3)
    page = client_for(wf_viewer).get(f"{WORKFLOWS}{wf.id}/change/")
    assert page.context["graph_complete"] is False
    assert page.context["graph_read"] == 200
    nodes = page.context["graph"]["nodes"]
    [callback] = [n for n in nodes if not n["summary"] and n["label"] == "callback"]
    assert callback["status"] == "cancelled"
    assert callback["url"].endswith(f"/{steps['callback'].id}/change/")
    [summary] = [n for n in nodes if n["summary"]]
    assert summary["label"] == "199 steps"
    assert page.context["graph"]["edges"]  # the summary's edge to the callback
    text = page.content.decode()
    assert ("jq-step", "cancelled") in graph_nodes(text)


def test_a_summarys_status_bar_keeps_its_colours() -> None:
    """The summary box's own rect is styled grey; its bars (also rects, each in a link
    of its own) keep the status colours they are drawn with."""
    from pathlib import Path

    import django_jobqueue

    css = (
        Path(django_jobqueue.__file__).parent / "templates/django_jobqueue/admin/style.html"
    ).read_text()
    rule = re.search(r"\.jq-graph \.jq-summary > a > rect[^{]*\{", css)
    assert rule is not None
    assert ":not(.jq-bar)" in rule.group(0)


def test_a_long_chain_is_drawn_in_a_bounded_number_of_rows(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    names = [f"s{i}" for i in range(80)]
    wf, _ = make_workflow(
        "long", dict.fromkeys(names, "completed"), list(itertools.pairwise(names))
    )
    page = client_for(wf_viewer).get(f"{WORKFLOWS}{wf.id}/change/")
    g = page.context["graph"]
    assert len(g["nodes"]) <= NODE_CAP
    rows = {n["y"] for n in g["nodes"]}
    assert len(rows) <= 25
    [middle] = [n for n in g["nodes"] if n["summary"]]
    assert middle["label"] == "56 steps"
    assert middle["sub"].startswith("layers 13")


def test_the_job_page_of_a_step_links_its_workflow_parents_and_children(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    wf, steps = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES, status="failed")
    client = client_for(wf_viewer)
    text = client.get(f"{JOBS}{steps['left'].id}/change/").content.decode()
    assert f'href="{WORKFLOWS}{wf.id}/change/"' in text
    parents = re.search(r'id="job-parents">(.*?)</dd>', text, re.S)
    children = re.search(r'id="job-children">(.*?)</dd>', text, re.S)
    assert parents
    assert children
    assert f"{JOBS}{steps['fetch'].id}/change/" in parents.group(1)
    assert f"{JOBS}{steps['report'].id}/change/" in children.group(1)
    assert "fetch" not in children.group(1)
    plain = Job.objects.create(kind="tests.taskapp.tasks.add", payload={"a": 1, "b": 2})
    assert 'id="job-workflow"' not in client.get(f"{JOBS}{plain.id}/change/").content.decode()


def test_workflow_pages_need_the_view_workflow_permission(
    operator: User, wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    wf, steps = make_workflow("import-orders", DIAMOND, DIAMOND_EDGES)
    refused = client_for(operator)  # every job permission, not view_workflow
    assert refused.get(WORKFLOWS).status_code == 403
    assert refused.get(f"{WORKFLOWS}{wf.id}/change/").status_code == 403
    allowed = client_for(wf_viewer)
    assert allowed.get(f"{WORKFLOWS}{wf.id}/change/").status_code == 200
    assert allowed.get(f"{WORKFLOWS}{wf.id}/delete/").status_code == 403  # cleanup's job
    assert allowed.get(f"{WORKFLOWS}add/").status_code == 403
    nobody = "00000000-0000-0000-0000-000000000000"
    assert allowed.get(f"{WORKFLOWS}{nobody}/change/").status_code == 404
    assert allowed.get(f"{WORKFLOWS}not-a-uuid/change/").status_code == 404
    assert allowed.get(f"{JOBS}?workflow=not-a-uuid").status_code in (200, 302)
    assert Job.objects.filter(workflow=wf).count() == len(steps)


def test_hostile_names_are_escaped_and_undecodable_step_values_never_fail_a_page(
    wf_viewer: User, client_for: Callable[..., Client]
) -> None:
    wf, steps = make_workflow(XSS, {XSS: "dead", "b": "cancelled"}, [(XSS, "b")])
    write_raw(steps[XSS].id, "payload", TOO_DEEP)
    write_raw(steps["b"].id, "result", TOO_DEEP)
    client = client_for(wf_viewer)
    for url in (WORKFLOWS, f"{WORKFLOWS}{wf.id}/change/", f"{JOBS}{steps['b'].id}/change/"):
        page = client.get(url)
        assert page.status_code == 200, url
        assert XSS not in page.content.decode(), url
    text = client.get(f"{JOBS}{steps[XSS].id}/change/").content.decode()
    assert "(undecodable:" in text
    assert XSS not in text
