"""Which queue database holds a job or a workflow named by its id: with one database,
that one without a query; with several, the first that has it (one indexed look each,
home first). What an operator's action by id and ``job(id)`` start from."""

from __future__ import annotations

import uuid

from django_jobqueue import routing
from django_jobqueue.models import Job, Workflow


def database_of_job(job_id: uuid.UUID) -> str | None:
    """The queue database holding job ``job_id`` (None: none does)."""
    if not routing.several():
        return routing.current()
    for alias in routing.aliases():
        if Job.objects.using(alias).filter(id=job_id).exists():
            return alias
    return None


def database_of_workflow(workflow_id: uuid.UUID) -> str | None:
    """The queue database holding workflow ``workflow_id`` (None: none does)."""
    if not routing.several():
        return routing.current()
    for alias in routing.aliases():
        if Workflow.objects.using(alias).filter(id=workflow_id).exists():
            return alias
    return None
