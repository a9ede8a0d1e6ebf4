"""Without ``sentry_sdk.init`` (or without the SDK), a run reports nothing to Sentry and
``running`` gives no report: the one check each run pays."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from django_jobqueue import sentry


def test_without_an_initialised_sdk_a_run_has_no_report() -> None:
    job = SimpleNamespace(id=uuid.uuid4(), kind="k", queue="q", run_count=1, workflow_id=None)
    assert not sentry.active()
    with sentry.running(job, worker_id="w:1") as report:
        assert report is None


def test_the_tags_name_the_job() -> None:
    workflow = uuid.uuid4()
    job = SimpleNamespace(id=uuid.uuid4(), kind="k", queue="q", run_count=2, workflow_id=workflow)
    assert sentry.job_tags(job) == {
        "jobqueue.kind": "k",
        "jobqueue.job_id": str(job.id),
        "jobqueue.queue": "q",
        "jobqueue.attempt": "2",
        "jobqueue.workflow": str(workflow),
    }
