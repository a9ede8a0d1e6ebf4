"""The executor without a database: how each way a task can end becomes a ``RunResult``,
and the settlement ``decide`` makes of it. Real tasks, registered for the test; the
run never touches a connection, so none is opened (pytest-django would refuse one)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from django_jobqueue import Context, Pause, Permanent, task
from django_jobqueue.rules.control import RetryAfter
from django_jobqueue.rules.lifecycle import Policy
from django_jobqueue.run.executor import RunResult, decide, execute, run_of
from django_jobqueue.states import Outcome, Status
from django_jobqueue.store import Claimed
from django_jobqueue.task.registry import TaskDef, registry
from django_jobqueue.validation import Undecodable
from tests.helpers import claimed

LIMIT = 1024 * 1024
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POLICY = Policy(
    max_failures=3,
    lease=timedelta(minutes=1),
    backoff_base=timedelta(seconds=10),
    backoff_cap=timedelta(hours=1),
    backoff_jitter=0.0,
)


@pytest.fixture(autouse=True)
def kinds() -> Iterator[None]:
    """The tasks these tests run, registered for the test only."""
    with registry.isolated():

        @task(kind="unit.returns")
        def returns(a: int, b: int) -> int:
            return a + b

        @task(kind="unit.raises")
        def raises() -> None:
            raise LookupError("no such thing")

        @task(kind="unit.pauses", takes_context=True)
        def pauses(ctx: Context) -> None:
            ctx.carry["page"] = 2
            raise Pause(timedelta(minutes=5), note="waiting for page 3")

        @task(kind="unit.permanent")
        def permanent() -> None:
            raise Permanent("the account is closed")

        @task(kind="unit.retry_after")
        def retry_after(minutes: float | None) -> None:
            delay = None if minutes is None else timedelta(minutes=minutes)
            try:
                raise ConnectionError("upstream said 429")
            except ConnectionError as exc:
                raise RetryAfter(delay) from exc

        @task(kind="unit.not_json")
        def not_json() -> object:
            return object()

        @task(kind="unit.bad_carry", takes_context=True)
        def bad_carry(ctx: Context) -> str:
            ctx.carry = ["not", "a", "dict"]  # type: ignore[assignment]
            return "done"

        @task(kind="unit.exits")
        def exits() -> None:
            sys.exit(3)

        @task(kind="unit.async")
        async def async_task(n: int) -> int:
            await asyncio.sleep(0)
            return n * 2

        yield


def _job(kind: str, payload: dict[str, Any] | None = None, **kw: Any) -> Claimed:
    """A second run (one failure before), carrying what the first kept."""
    fields: dict[str, Any] = {"run_count": 2, "failure_count": 1, "carry": {"kept": True}}
    return claimed(kind, payload=payload, at=NOW, lease=POLICY.lease, **(fields | kw))


def _run(job: Claimed) -> RunResult:
    defn: TaskDef | None = registry.find(job.kind)
    return execute(defn, job, Context.for_job(job), max_output_bytes=LIMIT)


def test_a_task_that_returns_completes_with_its_value() -> None:
    job = _job("unit.returns", {"a": 2, "b": 3})
    run = _run(job)
    assert (run.end, run.value, run.note) == ("completed", 5, "")
    assert run.duration >= timedelta(0)
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    assert (s.status, s.outcome, s.failed, s.result) == (Status.COMPLETED, "completed", False, 5)
    assert (s.job_id, s.run_no, s.worker) == (job.id, 2, "host:1")


def test_a_task_that_raises_fails_with_the_error_and_retries_after_backoff() -> None:
    run = _run(_job("unit.raises"))
    assert run.end == "failed"
    assert run.note.startswith("LookupError: no such thing")
    assert "Traceback" in run.note
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    # The second failure waits base x (fib(4) - 1) = 20 s.
    assert (s.status, s.outcome, s.failed) == (Status.PENDING, Outcome.RETRIED, True)
    assert s.visible_at == NOW + timedelta(seconds=20)


def test_a_pause_sends_the_job_back_later_with_its_carry_and_no_failure() -> None:
    run = _run(_job("unit.pauses"))
    assert (run.end, run.resume_in, run.note) == (
        "paused",
        timedelta(minutes=5),
        "waiting for page 3",
    )
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    assert (s.status, s.outcome, s.failed) == (Status.PENDING, Outcome.PAUSED, False)
    assert s.visible_at == NOW + timedelta(minutes=5)
    assert s.carry == {"kept": True, "page": 2}


def test_permanent_ends_the_job_dead_with_its_reason() -> None:
    run = _run(_job("unit.permanent"))
    assert (run.end, run.note) == ("permanent", "the account is closed")
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    assert (s.status, s.outcome, s.failed, s.note) == (
        Status.DEAD,
        Outcome.DEAD,
        True,
        "the account is closed",
    )


def test_retry_after_chooses_the_delay_and_none_ends_the_job_dead() -> None:
    run = _run(_job("unit.retry_after", {"minutes": 30}))
    assert (run.end, run.retry_in) == ("failed", timedelta(minutes=30))
    assert run.note.startswith("ConnectionError: upstream said 429")  # the cause, not ours
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    assert (s.status, s.visible_at) == (Status.PENDING, NOW + timedelta(minutes=30))
    run = _run(_job("unit.retry_after", {"minutes": None}))
    assert run.end == "permanent"
    assert decide(run, policy=POLICY, worker_id="host:1", now=NOW).status == Status.DEAD


def test_a_return_value_that_is_not_json_fails_the_run_and_is_not_stored() -> None:
    run = _run(_job("unit.not_json"))
    assert (run.end, run.value) == ("failed", None)
    assert "the return value is not JSON-serialisable (object)" in run.note
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    assert (s.status, s.result, s.failed) == (Status.PENDING, None, True)


def test_a_carry_that_is_not_a_dict_fails_the_run_and_the_stored_one_is_kept() -> None:
    run = _run(_job("unit.bad_carry"))
    assert run.end == "failed"
    assert "ctx.carry must be a dict, not list" in run.note
    assert run.carry == {"kept": True}


def test_an_async_task_runs_to_its_value() -> None:
    run = _run(_job("unit.async", {"n": 21}))
    assert (run.end, run.value) == ("completed", 42)


def test_sys_exit_in_a_task_is_a_failure_not_the_end_of_the_thread() -> None:
    run = _run(_job("unit.exits"))
    assert run.end == "failed"
    assert run.note.startswith("SystemExit: 3")


def test_a_payload_that_no_longer_fits_the_task_is_a_mismatch_that_dies() -> None:
    run = _run(_job("unit.returns", {"a": 1, "c": 2}))
    assert run.end == "mismatch"
    assert run.note.startswith("payload no longer fits the task")
    s = decide(run, policy=POLICY, worker_id="host:1", now=NOW)
    assert (s.status, s.outcome) == (Status.DEAD, Outcome.DEAD)


def test_an_unknown_kind_or_an_undecodable_payload_is_a_mismatch() -> None:
    run = _run(_job("unit.nobody"))
    assert (run.end, run.note) == ("mismatch", "no task is registered under kind 'unit.nobody'")
    job = _job("unit.returns", Undecodable("Expecting value"))  # type: ignore[arg-type]
    run = _run(job)
    assert run.end == "mismatch"
    assert "the stored payload cannot be decoded (Expecting value)" in run.note
    assert run.carry == {}  # the stored one was readable, but none is written back


def test_run_of_names_the_claimed_run_the_guard_checks() -> None:
    job = _job("unit.returns")
    which = run_of(job, worker="host:1", duration=timedelta(seconds=2))
    assert (which.job_id, which.kind, which.run_no, which.worker) == (
        job.id,
        "unit.returns",
        2,
        "host:1",
    )
    assert (which.started_at, which.duration, which.attachment) == (
        None,
        timedelta(seconds=2),
        None,
    )
