"""``manage.py jobqueue show`` hides a Django task's positional secrets by the names of
the parameters they bind to (issue 17): the payload stores ``["ann", "hunter2"]`` with
no name beside "hunter2"."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from django_jobqueue.models import Job
from django_jobqueue.redaction import MARK
from tests.djtasks import tasks as djtasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def shown_payload(job_id: object) -> object:
    out = StringIO()
    call_command("jobqueue", "show", str(job_id), stdout=out)
    line = next(x for x in out.getvalue().splitlines() if x.strip().startswith("payload"))
    return json.loads(line.split(":", 1)[1])


def test_show_hides_django_tasks_positional_secrets_by_parameter_name() -> None:
    result = djtasks.log_in.enqueue("ann", "hunter2", "key-one")
    payload = shown_payload(result.id)
    assert isinstance(payload, dict)
    assert payload["args"] == ["ann", MARK, MARK]
    # stored as given: the task receives the real values
    assert Job.objects.get(id=result.id).payload["args"] == ["ann", "hunter2", "key-one"]
