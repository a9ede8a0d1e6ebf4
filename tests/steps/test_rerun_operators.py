"""Operators re-run a job from a step and find diverged jobs: the job page's steps table
(``re-run from here``, for users who may requeue), ``jobqueue rerun ID --from STEP`` and
``jobqueue steps --divergent``, each journalled with the operator or refusing bad
input by name."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from django_jobqueue import Context, Status, run_now, task
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.admin.conftest import make_user
from tests.helpers import recorded

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
KIND = "tests.steps.operated"


@pytest.fixture(autouse=True)
def isolated() -> Iterator[None]:
    with registry.isolated():
        yield


def deploy(*names: str) -> object:
    """The task as a release has it: steps ``names``, then an hour's sleep."""

    def operated(ctx: Context) -> list[str]:
        done = [ctx.step(name, str, name) for name in names]
        ctx.sleep(3600)
        return done

    return task(takes_context=True, kind=KIND, max_failures=None)(operated)


def parked_job(*names: str) -> uuid.UUID:
    handle = deploy(*names).enqueue()  # type: ignore[attr-defined]
    run_jobs()
    return uuid.UUID(str(handle.id))


def client(username: str, perms: list[str]) -> Client:
    c = Client()
    c.force_login(make_user(username, perms))
    return c


def command(*args: str) -> str:
    out = StringIO()
    call_command("jobqueue", *args, stdout=out)
    return out.getvalue()


def test_the_steps_table_re_runs_the_job_from_a_step_journalled_with_the_admin_user() -> None:
    job_id = parked_job("a", "b")
    operator = client("ops", ["view_job", "requeue_job"])
    page = operator.get(f"{JOBS}{job_id}/change/")
    assert page.context["rerun"] is True
    assert page.content.decode().count('class="job-rerun"') == 3  # a, b, sleep 1
    response = operator.post(f"{JOBS}{job_id}/rerun/", {"step": "b"}, follow=True)
    assert response.status_code == 200
    assert "Re-running from step &#x27;b&#x27;" in response.content.decode()
    assert [r["name"] for r in recorded(job_id)] == ["a"]
    job = Job.objects.get(id=job_id)
    assert (job.status, job.parked) == (Status.PENDING, "")
    entry = JournalEntry.objects.filter(job_id=job_id).order_by("-id").first()
    assert entry is not None
    assert entry.actor == "admin:ops"
    assert "re-run from step 'b' while pending (2 record(s) discarded: 'b', 'sleep 1')" in (
        entry.note
    )


def test_the_steps_table_refuses_an_unknown_step_a_viewer_and_a_get() -> None:
    job_id = parked_job("a")
    viewer = client("vic", ["view_job"])
    page = viewer.get(f"{JOBS}{job_id}/change/")
    assert page.context["rerun"] is False
    assert 'class="job-rerun"' not in page.content.decode()
    assert viewer.post(f"{JOBS}{job_id}/rerun/", {"step": "a"}).status_code == 403
    operator = client("ops", ["view_job", "requeue_job"])
    assert operator.get(f"{JOBS}{job_id}/rerun/").status_code == 405
    assert operator.post(f"{JOBS}{uuid.uuid4()}/rerun/", {"step": "a"}).status_code == 404
    response = operator.post(f"{JOBS}{job_id}/rerun/", {"step": "zz"}, follow=True)
    assert "recorded no step named &#x27;zz&#x27;" in response.content.decode()
    assert [r["name"] for r in recorded(job_id)] == ["a", "sleep 1"]


def test_jobqueue_rerun_from_a_step_and_its_refusals() -> None:
    job_id = parked_job("a", "b")
    printed = command("rerun", str(job_id), "--from", "b")
    assert printed.strip() == f"{job_id}: pending, re-run from step 'b'"
    entry = JournalEntry.objects.filter(job_id=job_id).order_by("-id").first()
    assert entry is not None
    assert entry.actor.startswith("manage.py jobqueue (")
    assert [r["name"] for r in recorded(job_id)] == ["a"]
    with pytest.raises(CommandError, match="recorded no step named 'x'"):
        command("rerun", str(job_id), "--from", "x")
    missing = uuid.uuid4()
    with pytest.raises(CommandError, match=f"No job with id {missing}"):
        command("rerun", str(missing), "--from", "a")
    with pytest.raises(CommandError, match="--from"):
        command("rerun", str(job_id))


def test_jobqueue_steps_divergent_lists_the_jobs_that_died_of_a_divergence() -> None:
    assert command("steps", "--divergent").strip() == "No job died of a step divergence."
    diverged = parked_job("a", "b")
    fine = parked_job("a", "b")
    deploy("a", "c", "b")
    run_now(diverged)
    run_jobs()
    assert Job.objects.get(id=diverged).status == Status.DEAD
    assert Job.objects.get(id=fine).status == Status.PENDING
    printed = command("steps", "--divergent")
    assert str(diverged) in printed
    assert str(fine) not in printed
    assert f"StepDivergence: {KIND}: job {diverged} diverged from its recorded steps at 'c'" in (
        printed
    )
    assert "jobqueue rerun ID --from STEP" in printed
    # Re-run, it is no longer listed.
    command("rerun", str(diverged), "--from", "b")
    assert str(diverged) not in command("steps", "--divergent")
    with pytest.raises(CommandError, match="--divergent"):
        command("steps")
