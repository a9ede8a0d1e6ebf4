"""The Celery-compatible surface without a database: schedules, options refused with
their alternative, routing, priorities, Celery's backoff, and canvases run eagerly
(``.apply()``) with Celery's results."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from django_jobqueue.contrib.celery import chain, chord, crontab, group, shared_task, states
from django_jobqueue.contrib.celery.calling import check_call, tier
from django_jobqueue.contrib.celery.config import Conf, route
from django_jobqueue.contrib.celery.exceptions import Unsupported
from django_jobqueue.contrib.celery.runner import backoff, rate
from django_jobqueue.contrib.celery.schedules import cron_of
from django_jobqueue.errors import InvalidArguments, InvalidOption
from django_jobqueue.states import Priority
from django_jobqueue.task.registry import registry
from tests.celeryapp import tasks


def test_beat_schedules_become_cron_expressions_or_are_refused_naming_the_entry() -> None:
    assert cron_of(crontab(minute=0, hour="*/3", day_of_week="mon-fri")) == "0 */3 * * mon-fri"
    assert cron_of(30.0) == "* * * * * */30"
    assert cron_of(timedelta(minutes=15)) == "*/15 * * * *"
    assert cron_of(timedelta(hours=6)) == "0 */6 * * *"
    assert cron_of(timedelta(days=1)) == "0 0 * * *"
    with pytest.raises(Unsupported, match=r"'nightly'.*every 420 s.*crontab"):
        cron_of(timedelta(minutes=7), entry="nightly")
    with pytest.raises(Unsupported, match="nowfun"):
        crontab(nowfun=None)


def test_options_that_do_not_map_are_refused_at_decoration_and_call_naming_the_option() -> None:
    with registry.isolated():
        with pytest.raises(Unsupported, match=r"serializer='pickle'.*JSON"):
            shared_task(serializer="pickle")(lambda: None)
        with pytest.raises(Unsupported, match="Request"):
            shared_task(Request=object)(lambda: None)
        with pytest.raises(InvalidOption, match="unknown task option 'colour'"):
            shared_task(colour="red")(lambda: None)
    with pytest.raises(Unsupported, match=r"task_id.*idempotency_key"):
        check_call("t", {"task_id": "x"})
    with pytest.raises(Unsupported, match="link_error"):
        tasks.add.apply_async((1, 2), link_error=tasks.add.s(1))
    with pytest.raises(InvalidArguments, match="missing a required argument"):
        tasks.add.s(1).apply()
    with pytest.raises(Unsupported, match="pickle"):
        Conf()["task_serializer"] = "pickle"


def test_routes_priorities_and_rates_map_as_celery_writes_them() -> None:
    conf = Conf()
    conf.task_routes = {"proj.mail.*": {"queue": "mail", "priority": 2}, "proj.x": "io"}
    assert route(conf, "proj.mail.send") == {"queue": "mail", "priority": 2}
    assert route(conf, "proj.x") == {"queue": "io"}
    assert route(conf, "other") == {}
    assert [tier(p, name="t") for p in (0, 3, 4, 6, 7, 9)] == [
        Priority.HIGH, Priority.HIGH, Priority.NORMAL, Priority.NORMAL, Priority.LOW, Priority.LOW
    ]  # fmt: skip
    with pytest.raises(InvalidOption, match="0-9"):
        tier(10, name="t")
    assert rate("10/m", kind="t") == "10/m"
    assert rate(5, kind="t") == "5/s"


def test_celerys_exponential_backoff_without_jitter_is_factor_times_two_to_the_retries() -> None:
    assert [backoff(factor=5, retries=n, maximum=600, jitter=False) for n in range(4)] == [
        5, 10, 20, 40
    ]  # fmt: skip
    assert backoff(factor=5, retries=10, maximum=600, jitter=False) == 600
    assert 0 <= backoff(factor=5, retries=3, maximum=600, jitter=True) <= 40


def test_canvases_applied_eagerly_give_celerys_results() -> None:
    assert chain(tasks.add.s(4, 4), tasks.mul.s(8)).apply().get() == 64
    assert chord([tasks.add.s(i, i) for i in range(10)], tasks.xsum.s()).apply().get() == 90
    assert group(tasks.add.s(i, i) for i in range(4)).apply().get() == [0, 2, 4, 6]
    assert (tasks.add.s(1, 1) | tasks.add.si(5, 5)).apply().get() == 10
    assert tasks.add.chunks([(i, i) for i in range(3)], 2).apply().get() == [[0, 2], [4]]
    retried = tasks.always_key_error.apply()
    assert retried.state == states.FAILURE
    assert isinstance(retried.result, KeyError)
    with pytest.raises(KeyError):
        retried.get()
    assert tasks.add(2, 3) == 5  # a direct call runs the function


def test_task_always_eager_runs_delay_and_canvases_here() -> None:
    app = tasks.add.owner
    app.conf.task_always_eager = True
    try:
        result = tasks.add.delay(2, 3)
        assert result.state == states.SUCCESS
        assert result.get() == 5
        assert (tasks.add.s(1, 1) | tasks.mul.s(4)).delay().get() == 8
        app.conf.task_eager_propagates = True
        with pytest.raises(ValueError, match="no retry for this"):
            tasks.boom.delay()
    finally:
        del app.conf.task_always_eager
        app.conf.pop("task_eager_propagates", None)


def test_config_from_django_settings_is_read_when_asked_for() -> None:
    app = tasks.add.owner
    with override_settings(
        CELERY_TASK_ROUTES={"tests.celeryapp.tasks.*": {"queue": "celery-io"}},
        CELERY_TASK_DEFAULT_QUEUE="fallback",
    ):
        assert app.conf.task_default_queue == "fallback"
        assert route(app.conf, "tests.celeryapp.tasks.add") == {"queue": "celery-io"}
    assert app.conf.task_routes is None


def test_canvas_options_apply_to_its_tasks_and_chord_unlock_tuning_is_refused() -> None:
    with pytest.raises(Unsupported, match=r"chord\(interval=...\).*nothing polls"):
        chord([tasks.add.s(1, 1)], tasks.xsum.s()).apply_async(interval=0.5)
    with pytest.raises(InvalidOption, match="unknown option 'colour'"):
        group(tasks.add.s(1, 1)).apply_async(colour="red")
    first = tasks.add.s(1, 1)
    assert chain(first, tasks.mul.s(2)).apply(queue="io").get() == 4
    assert first.options == {}  # the caller's signature is left as it was
