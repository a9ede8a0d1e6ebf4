"""Which queue database holds a job or a workflow named by its id: with one database,
that one without a query; with several, the first that has it (one indexed look each,
home first). What an operator's action by id and ``job(id)`` start from."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django_jobqueue import routing
from django_jobqueue.errors import QueueDatabaseUnavailable
from django_jobqueue.models import Job, Workflow
from django_jobqueue.store.dialects import for_alias


@contextmanager
def on_database(alias: str) -> Iterator[str]:
    """The block's statements go to queue database ``alias``; a connection error there
    becomes ``QueueDatabaseUnavailable`` naming it (with several databases, which one
    is down is the first thing an operator needs)."""
    with routing.using(alias):
        try:
            yield alias
        except QueueDatabaseUnavailable:
            raise
        except Exception as exc:
            if not for_alias(alias).is_connection_error(exc):
                raise
            raise QueueDatabaseUnavailable(
                f"queue database {alias!r} is unavailable ({type(exc).__name__}: "
                f"{str(exc).strip()[:200]}); nothing was written to it",
                database=alias,
            ) from exc


def database_of_job(job_id: uuid.UUID) -> str | None:
    """The queue database holding job ``job_id`` (None: none does)."""
    return _holding(Job, job_id)


def database_of_workflow(workflow_id: uuid.UUID) -> str | None:
    """The queue database holding workflow ``workflow_id`` (None: none does)."""
    return _holding(Workflow, workflow_id)


def _holding(model: type[Job] | type[Workflow], row_id: uuid.UUID) -> str | None:
    """The queue database whose ``model`` table holds ``row_id`` (with one database,
    that one, unasked)."""
    if not routing.several():
        return routing.current()
    for alias in routing.aliases():
        if model.objects.using(alias).filter(id=row_id).exists():
            return alias
    return None
