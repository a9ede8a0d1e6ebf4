"""The Django Tasks backend's configuration, checked without a database: priority tiers,
OPTIONS and QUEUES, the task class's retry options, and how they become a policy."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import DuplicateKind, Priority, conf
from django_jobqueue.backend import JobQueueBackend, JobQueueTask, tier
from django_jobqueue.backend.compat import InvalidTask, InvalidTaskBackend, task_backends
from django_jobqueue.backend.options import BackendOptions
from django_jobqueue.backend.runner import DjangoTaskDef
from django_jobqueue.rules.control import RetryAfter
from django_jobqueue.run.context import Context
from django_jobqueue.run.executor import decide, execute
from django_jobqueue.store import Claimed
from django_jobqueue.task.functions import task
from django_jobqueue.task.registry import TaskDef, registry
from tests.djtasks import tasks
from tests.helpers import claimed


def every_minute(exc: BaseException, result: Any) -> float:
    return 60


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        (100, Priority.HIGH),
        (1, Priority.HIGH),
        (0, Priority.NORMAL),
        (-1, Priority.LOW),
        (-100, Priority.LOW),
    ],
)
def test_django_priority_maps_onto_three_tiers_by_sign(priority: int, expected: int) -> None:
    assert tier(priority) == expected


def test_backend_declares_every_feature() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, JobQueueBackend)
    assert backend.supports_defer
    assert backend.supports_async_task
    assert backend.supports_get_result
    assert backend.supports_priority
    assert backend.task_class is JobQueueTask


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"RETRIES": 3}, "Unknown OPTIONS key.*RETRIES.*Known keys: BACKOFF, MAX_ATTEMPTS"),
        ({"MAX_ATTEMPTS": 0}, "MAX_ATTEMPTS'\\] must be a positive integer or None"),
        ({"MAX_ATTEMPTS": True}, "MAX_ATTEMPTS'\\] must be a positive integer or None"),
        ({"BACKOFF": 30}, "BACKOFF'\\] must be a callable or its dotted path"),
        ({"BACKOFF": "tests.djtasks.tasks.nowhere"}, "cannot import 'tests.djtasks.tasks.nowhere'"),
        ([("MAX_ATTEMPTS", 1)], "OPTIONS'\\] must be a dict"),
    ],
)
def test_bad_options_are_refused_naming_the_key(options: Any, message: str) -> None:
    with pytest.raises(InvalidTaskBackend, match=message):
        JobQueueBackend("bad", {"OPTIONS": options})


def test_system_check_wants_django_jobqueue_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.apps import apps

    backend = JobQueueBackend("checked", {})
    assert backend.check() == []
    monkeypatch.setattr(apps, "is_installed", lambda name: name != "django_jobqueue")
    [error] = backend.check()
    assert error.id == "django_jobqueue.E101"
    assert "TASKS['checked']" in error.msg


def test_options_take_a_backoff_by_dotted_path() -> None:
    backend = JobQueueBackend(
        "ok", {"OPTIONS": {"MAX_ATTEMPTS": 4, "BACKOFF": "tests.djtasks.tasks.an_hour"}}
    )
    assert backend.retry_options == BackendOptions(max_attempts=4, backoff=tasks.an_hour)


def test_a_queue_name_the_queue_cannot_store_is_refused() -> None:
    with pytest.raises(InvalidTaskBackend, match=r"QUEUES.*at most 100 characters"):
        JobQueueBackend("bad", {"QUEUES": ["x" * 101]})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_attempts", 0, "max_attempts must be a positive integer"),
        ("max_attempts", 2.5, "max_attempts must be a positive integer"),
        ("backoff", 30, "backoff must be a callable"),
        ("lease", 30, "lease must be a timedelta"),
        ("lease", timedelta(0), "lease must be positive"),
        ("timeout", timedelta(seconds=-1), "timeout must be positive"),
    ],
)
def test_bad_task_retry_options_are_refused(field: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidTask, match=message):
        JobQueueTask(func=tasks.add.func, **{field: value})


def _definition(task_obj: Any, options: BackendOptions) -> DjangoTaskDef:
    return DjangoTaskDef(task_obj, options=options, sender=JobQueueBackend)


def test_policy_takes_the_task_then_the_backend_then_jobqueue_settings() -> None:
    settings_default = conf.get().policy()
    bare = _definition(tasks.add, BackendOptions(max_attempts=None, backoff=None))
    assert bare.policy() == settings_default
    assert bare.retry_backoff is None
    backend_wide = _definition(tasks.add, BackendOptions(max_attempts=7, backoff=every_minute))
    assert backend_wide.policy().max_failures == 7
    assert backend_wide.retry_backoff is every_minute
    own = _definition(tasks.retry_in_an_hour, BackendOptions(max_attempts=7, backoff=every_minute))
    assert own.policy().max_failures == 5
    assert own.retry_backoff is tasks.an_hour
    leased = _definition(tasks.slow_first_attempt, BackendOptions(max_attempts=None, backoff=None))
    assert leased.policy().lease == timedelta(seconds=2)
    assert registry.leases()["tests.djtasks.tasks.slow_first_attempt"] == timedelta(seconds=2)


def test_django_tasks_are_registered_under_their_module_path() -> None:
    defn = registry.get("tests.djtasks.tasks.add")
    assert isinstance(defn, DjangoTaskDef)
    assert defn.task is tasks.add
    assert defn.origin == "django.tasks:tests.djtasks.tasks.add"
    # Another task object for the same function (using()) keeps the first one registered.
    tasks.add.using(priority=5)
    assert registry.get("tests.djtasks.tasks.add").task is tasks.add


def test_a_kind_of_ours_cannot_take_a_django_tasks_name() -> None:
    def clash() -> None:
        return None

    with pytest.raises(DuplicateKind, match=r"tests\.djtasks\.tasks\.add"):
        task(kind="tests.djtasks.tasks.add")(clash)
    assert registry.get("tests.djtasks.tasks.add").task is tasks.add


LIMIT = 1024 * 1024  # the executor's bound on what a run hands back


class _Raises(TaskDef):
    """A registry entry whose run fails with ValueError and decides its retry itself."""

    def __init__(self, delay: timedelta | None) -> None:
        self.delay = delay

    def execute(self, payload: dict[str, Any], ctx: Context) -> Any:
        try:
            raise ValueError("upstream said no")
        except ValueError as exc:
            raise RetryAfter(self.delay) from exc


def _claimed() -> Claimed:
    return claimed(claimed_by="w")


def test_retry_after_replaces_the_backoff_curve_for_one_retry() -> None:
    job = _claimed()
    run = execute(_Raises(timedelta(hours=1)), job, Context.for_job(job), max_output_bytes=LIMIT)
    assert (run.end, run.retry_in) == ("failed", timedelta(hours=1))
    assert run.note.startswith("ValueError: upstream said no")
    now = timezone.now()
    settled = decide(run, policy=conf.get().policy(), worker_id="w", now=now)
    assert (settled.status, settled.outcome, settled.failed) == ("pending", "retried", True)
    assert settled.visible_at == now + timedelta(hours=1)


def test_retry_after_none_ends_the_job_dead_and_max_failures_still_applies() -> None:
    job = _claimed()
    run = execute(_Raises(None), job, Context.for_job(job), max_output_bytes=LIMIT)
    assert run.end == "permanent"
    assert "upstream said no" in run.note
    settled = decide(run, policy=conf.get().policy(), worker_id="w")
    assert (settled.status, settled.failed) == ("dead", True)
    last_chance = dataclasses.replace(conf.get().policy(), max_failures=1)
    run = execute(_Raises(timedelta(hours=1)), job, Context.for_job(job), max_output_bytes=LIMIT)
    assert decide(run, policy=last_chance, worker_id="w").status == "dead"
    with pytest.raises(ValueError, match="must not be negative"):
        RetryAfter(timedelta(seconds=-1))
