"""Several queue databases cost no statement more per job: an enqueue, a batch and a
workflow send their database the same statements as on one database (the routing is
Python, made once per call), and nothing to any other database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_jobqueue import Workflow, routing
from tests.shards import layout
from tests.shards.conftest import DATABASES
from tests.taskapp import tasks

pytestmark = [pytest.mark.shards, pytest.mark.django_db(transaction=True, databases=DATABASES)]


def statements(run: Callable[[], Any]) -> dict[str, int]:
    """The statements ``run`` sends, by alias (the project's and the queue databases)."""
    aliases = ["default", *layout.ALIASES]
    captures = [CaptureQueriesContext(connections[a]) for a in aliases]
    for capture in captures:
        capture.__enter__()
    try:
        run()
    finally:
        for capture in captures:
            capture.__exit__(None, None, None)
    return {a: len(c.captured_queries) for a, c in zip(aliases, captures, strict=True)}


def work(key: str) -> dict[str, Callable[[], Any]]:
    def flow() -> None:
        graph = Workflow("three")
        first = graph.add(tasks.add.using(key=key).s(1, 2))
        graph.add(tasks.add.s(3, 4), after=[first])
        graph.add(tasks.noop.s(), after=[first])
        graph.enqueue()

    return {
        "enqueue": lambda: tasks.add.using(key=key).enqueue(1, 2),
        "enqueue_many": lambda: tasks.per_shop.using(key=key).enqueue_many(
            [{"shop": 1, "seconds": 0}] * 10
        ),
        "workflow": flow,
    }


def test_each_enqueue_path_sends_the_same_statements_as_on_one_database(
    clusters: object, transactional_db: None
) -> None:
    key = "tenant:7"
    one = {name: statements(run) for name, run in work(key).items()}
    assert all(counts["default"] > 0 for counts in one.values())
    jobqueue = {**settings.JOBQUEUE, "DATABASES": layout.queue_databases()}
    with override_settings(JOBQUEUE=jobqueue):
        target = routing.for_key(key)
        several = {name: statements(run) for name, run in work(key).items()}
    for name in one:
        assert several[name][target] == one[name]["default"], name  # the same statements
        others = {a: n for a, n in several[name].items() if a != target}
        assert others == dict.fromkeys(others, 0), name  # and none elsewhere
