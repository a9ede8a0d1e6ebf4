"""One run pipeline: ``testing.run_jobs`` and the worker run every job through the same
``Pipeline.run_one``, neither keeps a second copy of its steps, and a ``Run`` is read
off a claimed row in one place. Then what the pipeline does, below the database."""

from __future__ import annotations

import ast
import dataclasses
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from django_jobqueue import job_finished, job_started, task
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.pipeline import Ended, Pipeline
from django_jobqueue.states import Status
from django_jobqueue.store import Claimed
from django_jobqueue.task.registry import registry
from tests.helpers import claimed

PACKAGE = Path(__file__).resolve().parents[2] / "django_jobqueue"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

# What only the pipeline may call: each is a step of a run between its claim and its
# settlement. A caller that names one is running (part of) a pipeline of its own.
PIPELINE_STEPS = {"transactional", "decide", "execute", "announce", "failed_outright"}


def _tree(relative: str) -> ast.Module:
    return ast.parse((PACKAGE / relative).read_text())


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    [found] = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def _names(node: ast.AST) -> set[str]:
    """Every name and attribute ``node`` mentions, imports included."""
    found: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
        elif isinstance(n, ast.ImportFrom):
            found.update((n.module or "").split("."))
            found.update(a.name for a in n.names)
        elif isinstance(n, ast.Import):
            for a in n.names:
                found.update(a.name.split("."))
    return found


def _uses_run_one_of_a_pipeline(node: ast.AST) -> bool:
    """Whether ``node`` makes a ``Pipeline`` (or is handed the worker's) and reaches its
    ``run_one``."""
    names = _names(node)
    return "run_one" in names and ("Pipeline" in names or "_pipe" in names)


def _given(tree: ast.AST, callee: str, keyword: str) -> str:
    """What ``keyword=`` the one call of ``callee`` in ``tree`` is given, as source."""
    [call] = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == callee
    ]
    [given] = [k.value for k in call.keywords if k.arg == keyword]
    return ast.unparse(given)


def test_run_jobs_and_the_worker_call_the_same_run_function() -> None:
    run_jobs = _function(_tree("testing.py"), "run_jobs")
    assert _uses_run_one_of_a_pipeline(run_jobs), "testing.run_jobs must run jobs via run_one"
    # The worker hands its pipeline to its pools; they give the slot threads its run_one
    # and the event loop its arun_one (the same steps, awaited), and run what they are
    # given.
    assert _given(_tree("worker/loop.py"), "Pools", "pipe") == "self._pipe"
    pools = _tree("worker/pools.py")
    assert _given(pools, "Slots", "run") == "pipe.run_one"
    assert _given(pools, "EventLoop", "run") == "pipe.arun_one"
    assert "RunOne" in _names(_tree("worker/slots.py"))
    assert "ARunOne" in _names(_tree("worker/eventloop.py"))


def test_no_caller_of_the_pipeline_runs_a_step_of_it_itself() -> None:
    callers = [
        "testing.py",
        *(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "worker").rglob("*.py")),
    ]
    assert len(callers) > 5
    for relative in callers:
        steps = _names(_tree(relative)) & PIPELINE_STEPS
        assert not steps, f"{relative} runs pipeline steps itself: {sorted(steps)}"


def test_a_run_is_read_off_a_claimed_row_in_one_place() -> None:
    """Every ``Run(...)`` built from a claimed job's ``run_count`` is ``run_of``'s."""
    places = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for call in ast.walk(fn):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id == "Run"
                    and "run_count" in _names(call)
                ):
                    places.append(f"{path.relative_to(PACKAGE)}:{fn.name}")
    assert places == ["run/executor.py:run_of"]


# --- the pipeline below the database ------------------------------------------------


@pytest.fixture(autouse=True)
def kinds() -> Iterator[None]:
    with registry.isolated():

        @task(kind="unit.pipeline.add")
        def add(a: int, b: int) -> int:
            return a + b

        yield


def _job(**payload: Any) -> Claimed:
    return claimed("unit.pipeline.add", payload=payload, at=NOW)


@pytest.fixture
def pipe() -> Pipeline:
    return Pipeline(worker_id="host:1", alias="default", max_output_bytes=1024 * 1024)


def test_run_one_announces_the_run_and_decides_its_settlement(pipe: Pipeline) -> None:
    heard: list[dict[str, Any]] = []

    def receiver(**kw: Any) -> None:
        heard.append(kw)

    job = _job(a=1, b=2)
    job_started.connect(receiver)
    try:
        with ThreadConnections() as guard:
            ended = pipe.run_one(job, pipe.context(job), guard)
    finally:
        job_started.disconnect(receiver)
    [started] = heard
    assert (started["kind"], started["run_no"], started["worker"]) == (job.kind, 1, "host:1")
    assert started["job"].id == job.id
    assert ended.result.value == 3
    settlement = pipe.to_write(ended)
    assert settlement is ended.settlement
    assert settlement is not None
    assert (settlement.status, settlement.result, settlement.worker) == (
        Status.COMPLETED,
        3,
        "host:1",
    )


def test_settled_announces_only_the_settlements_the_guard_let_through(pipe: Pipeline) -> None:
    heard: list[dict[str, Any]] = []

    def receiver(**kw: Any) -> None:
        heard.append(kw)

    jobs = [_job(a=1, b=1), _job(a=2, b=2)]
    with ThreadConnections() as guard:
        ends = [pipe.run_one(j, pipe.context(j), guard) for j in jobs]
    batch = [pipe.to_write(e) for e in ends]
    assert all(s is not None for s in batch)
    job_finished.connect(receiver)
    try:
        pipe.settled([s for s in batch if s is not None], [False, True])
    finally:
        job_finished.disconnect(receiver)
    [finished] = heard
    assert finished["job"].id == jobs[1].id
    assert (finished["outcome"], finished["job"].status) == ("completed", Status.COMPLETED)


def test_a_guard_used_by_run_jobs_is_taken_off_its_connections_again() -> None:
    from django.db import connections

    before = {alias: list(connections[alias].execute_wrappers) for alias in connections}
    with ThreadConnections():
        assert all(len(connections[a].execute_wrappers) == len(before[a]) + 1 for a in connections)
    assert {alias: list(connections[alias].execute_wrappers) for alias in connections} == before


def test_policies_are_resolved_once_per_pipeline(pipe: Pipeline) -> None:
    assert pipe.policy("unit.pipeline.add") is pipe.policy("unit.pipeline.add")


def test_a_run_that_lost_its_claim_leaves_nothing_to_write_and_says_so(
    pipe: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    job = _job(a=1, b=2)
    with ThreadConnections() as guard:
        ended = pipe.run_one(job, pipe.context(job), guard)
    # What transactional.run hands back when a settlement in the run's transaction was
    # refused (the database tests reach it for real): nothing of the run may be written.
    ended.result.lost = True
    with caplog.at_level(logging.INFO, logger="django_jobqueue"):
        assert pipe.to_write(Ended(result=ended.result, settlement=None)) is None
    [record] = caplog.records
    assert f"dropped run job={job.id}" in record.getMessage()


def test_arun_one_takes_the_same_steps_for_an_async_task(pipe: Pipeline) -> None:
    import asyncio

    from django_jobqueue import Pause

    @task(kind="unit.pipeline.aadd")
    async def aadd(a: int, b: int) -> int:
        await asyncio.sleep(0)
        if a < 0:
            raise ValueError("negative")
        if b < 0:
            raise Pause(resume_in=timedelta(seconds=5), note="later")
        return a + b

    heard: list[dict[str, Any]] = []

    def receiver(**kw: Any) -> None:
        heard.append(kw)

    def run(**payload: Any) -> Ended:
        job = dataclasses.replace(_job(**payload), kind="unit.pipeline.aadd")
        return asyncio.run(pipe.arun_one(job, pipe.context(job)))

    job_started.connect(receiver)
    try:
        done, failed, paused = run(a=1, b=2), run(a=-1, b=0), run(a=1, b=-1)
    finally:
        job_started.disconnect(receiver)
    assert len(heard) == 3, "job_started for each async run"
    assert done.settlement is not None
    assert (done.settlement.status, done.settlement.result) == (Status.COMPLETED, 3)
    assert failed.settlement is not None
    assert failed.settlement.outcome == "retried"
    assert "ValueError: negative" in (failed.settlement.note or "")
    assert paused.settlement is not None
    assert (paused.settlement.outcome, paused.settlement.note) == ("paused", "later")
