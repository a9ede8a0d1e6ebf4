"""The task layer without a database: registration, kinds, payload binding, options."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import (
    Backoff,
    Context,
    DuplicateKind,
    InvalidOption,
    Merge,
    Priority,
    Task,
    task,
)
from django_jobqueue.ids import uuid7
from django_jobqueue.task.options import Options
from django_jobqueue.task.registry import PayloadMismatch, registry
from django_jobqueue.worker.claiming import floor_counts, priority_floor
from tests.taskapp import tasks


def _ctx(**kw: Any) -> Context:
    return Context(job_id=uuid7(), kind="k", run_count=1, failure_count=0, **kw)


def test_bare_decorator_registers_under_module_and_name() -> None:
    assert tasks.add.kind == "tests.taskapp.tasks.add"
    assert registry.get("tests.taskapp.tasks.add") is tasks.add
    assert tasks.add.priority == Priority.NORMAL
    assert tasks.add.queue == "default"


def test_decorator_options_are_kept() -> None:
    assert tasks.capped.kind == "tests.capped"
    assert tasks.short_lease_sleep.lease == timedelta(seconds=2)
    assert tasks.high.priority == Priority.HIGH
    assert tasks.slow_backoff.policy().backoff_base == timedelta(seconds=30)
    assert tasks.slow_backoff.policy().backoff_cap == timedelta(minutes=5)
    assert tasks.always_fails.policy().max_failures == 3
    assert tasks.fails_forever.policy().max_failures is None


def test_decorated_function_still_runs_inline() -> None:
    assert tasks.add(2, 3) == 5


def test_class_task_kind_and_defaults() -> None:
    assert tasks.Sync.kind == "tests.sync"
    assert registry.get("tests.sync").instance({"account_id": 3}) == tasks.Sync(3)


@pytest.mark.usefixtures("task_registry")
def test_duplicate_kind_is_an_error_at_import() -> None:
    def first() -> None: ...

    def second() -> None: ...

    task(kind="tests.dup")(first)
    with pytest.raises(DuplicateKind, match=r"'tests\.dup' is defined twice"):
        task(kind="tests.dup")(second)


@pytest.mark.usefixtures("task_registry")
def test_duplicate_kind_between_a_class_and_a_function() -> None:
    with pytest.raises(DuplicateKind):

        @dataclass
        class Clash(Task):
            kind = "tests.taskapp.tasks.add"

            def run(self, ctx: Context) -> None: ...

    assert registry.get("tests.taskapp.tasks.add") is tasks.add


@pytest.mark.usefixtures("task_registry")
def test_payload_maps_parameter_names_and_round_trips() -> None:
    @task(kind="tests.varargs")
    def varargs(a: int, *rest: int, flag: bool = False, **extra: Any) -> Any:
        return a, rest, flag, extra

    payload = varargs.payload((1, 2, 3), {"flag": True, "x": "y"})
    assert payload == {"a": 1, "rest": [2, 3], "flag": True, "extra": {"x": "y"}}
    assert varargs.execute(payload, _ctx()) == (1, (2, 3), True, {"x": "y"})


def test_context_is_passed_first_and_not_part_of_the_payload() -> None:
    assert tasks.fail_times.payload((), {"times": 0}) == {"times": 0}
    ctx = _ctx()
    assert tasks.fail_times.execute({"times": 0}, ctx) == "ok"
    assert ctx.attachment == {"run": 1}


def test_payload_that_no_longer_fits_is_detected_before_running() -> None:
    with pytest.raises(PayloadMismatch, match="no longer takes"):
        tasks.add.execute({"a": 1, "b": 2, "c": 3}, _ctx())
    with pytest.raises(PayloadMismatch, match="no longer fits"):
        tasks.add.execute({"a": 1}, _ctx())
    with pytest.raises(PayloadMismatch, match="no longer fits Sync"):
        registry.get("tests.sync").execute({"wrong": 1}, _ctx())


def test_async_function_runs_to_completion() -> None:
    assert tasks.async_add.execute({"a": 1, "b": 2}, _ctx()) == 3


def test_options_chain_and_validate() -> None:
    options = Options.build(priority=Priority.LOW)
    options = Options.build(options, delay=5)
    assert options.priority == Priority.LOW
    assert options.delay == timedelta(seconds=5)
    at = timezone.now()
    with pytest.raises(InvalidOption, match="give delay or run_at, not both"):
        Options.build(delay=1, run_at=at)


def test_invalid_task_options_fail_at_decoration() -> None:
    with pytest.raises(InvalidOption, match="priority"):
        task(priority=9)(lambda: None)
    with pytest.raises(InvalidOption, match="max_failures"):
        task(max_failures=0)(lambda: None)
    with pytest.raises(InvalidOption, match="lease"):
        task(lease=timedelta(0))(lambda: None)
    with pytest.raises(InvalidOption, match="backoff"):
        task(backoff=5)(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(InvalidOption, match="takes_context"):
        task(takes_context=True)(lambda: None)


@pytest.mark.usefixtures("task_registry")
def test_backoff_override_falls_back_to_settings_for_unset_fields() -> None:
    @task(kind="tests.half_backoff", backoff=Backoff(cap=timedelta(seconds=9)))
    def half() -> None: ...

    policy = half.policy()
    assert policy.backoff_cap == timedelta(seconds=9)
    assert policy.backoff_base == timedelta(0)  # tests.settings BACKOFF_BASE


def test_uuid7_ids_are_version_7_and_time_ordered() -> None:
    ids = [uuid7() for _ in range(1000)]
    assert all(i.version == 7 for i in ids)
    assert ids == sorted(ids)
    assert len(set(ids)) == 1000


@pytest.mark.parametrize(
    ("ratio", "expected"),
    [
        (None, [0] * 30),
        (4, ([0, 0, 0, 0, 1] * 4 + [0, 0, 0, 0, 2]) + [0, 0, 0, 0, 1]),
        (1, [0, 1, 0, 2, 0, 1, 0, 2]),
    ],
)
def test_priority_floor_cadence(ratio: int | None, expected: list[int]) -> None:
    assert [priority_floor(slot, ratio) for slot in range(len(expected))] == expected


@pytest.mark.parametrize("ratio", [None, 0, 1, 2, 4, 9])
def test_floor_counts_are_the_counts_of_the_slots_floors(ratio: int | None) -> None:
    """What a claim prefers, counted, is what walking its slots' floors gives."""
    for slot in range(0, 240, 7):
        for free in (0, 1, 2, 3, 5, 16, 17, 80, 101):
            walked = Counter(priority_floor(slot + i, ratio) for i in range(free))
            expected = {f: n for f, n in walked.items() if f}
            assert floor_counts(slot, free, ratio) == expected, (slot, free)


def test_a_merge_decision_is_built_by_its_constructors_only() -> None:
    with pytest.raises(ValueError, match="Merge action must be one of keep, replace, with"):
        Merge("nonsense")  # type: ignore[arg-type]


def test_the_cancel_flag_is_one_event_whichever_thread_asks_first() -> None:
    """``ctx.cancelled`` is made on first use: threads that ask at once get the one flag,
    and a flag set before the run looks is seen set; one handed in is kept."""
    ctx = _ctx()
    seen: list[threading.Event] = []
    start = threading.Barrier(8)

    def look() -> None:
        start.wait()
        seen.append(ctx.cancelled)

    threads = [threading.Thread(target=look) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(flag) for flag in seen}) == 1
    assert seen[0] is ctx.cancelled
    assert not ctx.cancelled.is_set()
    late = _ctx()
    late.cancelled.set()
    assert late.cancelled.is_set()
    given = threading.Event()
    assert _ctx(cancelled=given).cancelled is given


def test_invalid_time_limits_fail_at_decoration_naming_the_option() -> None:
    with pytest.raises(InvalidOption, match="time_limit") as info:
        task(time_limit=0)(lambda: None)
    assert info.value.option == "time_limit"
    with pytest.raises(InvalidOption, match="time_limit"):
        task(time_limit="soon")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(InvalidOption, match="soft_time_limit") as info:
        task(soft_time_limit=-1)(lambda: None)
    assert info.value.option == "soft_time_limit"
    with pytest.raises(InvalidOption, match=r"soft_time_limit \(0:00:05\) must be below"):
        task(time_limit=5, soft_time_limit=5)(lambda: None)
    with pytest.raises(InvalidOption, match="soft_time_limit"):

        class Slow(Task):
            time_limit = 2
            soft_time_limit = timedelta(seconds=3)

            def run(self) -> None: ...


@pytest.mark.usefixtures("task_registry")
def test_the_hard_limit_is_the_smaller_of_time_limit_and_timeout_named() -> None:
    @task(kind="tests.limits_both", time_limit=30, soft_time_limit=20, timeout=timedelta(minutes=1))
    def both() -> None: ...

    @task(kind="tests.limits_timeout", timeout=timedelta(seconds=10), time_limit=60)
    def timeout_first() -> None: ...

    @task(kind="tests.limits_none")
    def unlimited() -> None: ...

    assert both.policy().hard_limit() == (timedelta(seconds=30), "time_limit")
    assert both.policy().soft_time_limit == timedelta(seconds=20)
    assert timeout_first.policy().hard_limit() == (timedelta(seconds=10), "timeout")
    assert unlimited.policy().hard_limit() is None


def test_a_thread_worker_names_the_soft_limits_it_cannot_raise() -> None:
    from django_jobqueue.worker.startup import soft_limits_ignored

    kinds = ["tests.runaway", tasks.record.kind]
    assert soft_limits_ignored(kinds, "thread") == ["tests.runaway"]
    assert soft_limits_ignored(kinds, "process") == []
