"""Periodic schedules without a database: cron parsing and tick arithmetic, which ticks
are due (on time, missed, caught up), and every bad schedule refused with an error
naming what is wrong, in code and in the PERIODIC setting."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings

from django_jobqueue import (
    ConfigurationError,
    Context,
    InvalidArguments,
    InvalidOption,
    InvalidPayload,
    Task,
    UnknownKind,
    conf,
    periodic,
    task,
)
from django_jobqueue.rules.cron import Cron, due_ticks
from django_jobqueue.task.periodic import schedules
from django_jobqueue.task.registry import Registry

S = timedelta(seconds=1)
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday, on every minute/5-minute tick


def cron(expression: str, tz: Any = UTC) -> Cron:
    return Cron.parse(expression, tz=tz, name="cron", error=ValueError)


# --- cron arithmetic ----------------------------------------------------------------------


def test_cron_next_after_and_latest_include_a_tick_that_falls_exactly_on_the_moment() -> None:
    every5 = cron("*/5 * * * *")
    assert every5.next_after(T0) == T0 + timedelta(minutes=5)
    assert every5.next_after(T0 - timedelta(microseconds=1)) == T0
    assert every5.latest(T0) == T0
    assert every5.latest(T0 - S) == T0 - timedelta(minutes=5)
    assert every5.latest(T0 + timedelta(minutes=4, seconds=59)) == T0


def test_cron_ticks_lists_the_ticks_in_a_half_open_window_in_utc() -> None:
    every2s = cron("* * * * * */2")  # croniter's sixth field: seconds
    ticks = every2s.ticks(after=T0, until=T0 + 6 * S)
    assert ticks == [T0 + 2 * S, T0 + 4 * S, T0 + 6 * S]
    assert all(t.tzinfo is UTC for t in ticks)


def test_cron_reads_the_expression_in_its_time_zone() -> None:
    paris = cron("0 3 * * *", ZoneInfo("Europe/Paris"))
    # 03:00 in Paris is 02:00 UTC in winter and 01:00 UTC in summer.
    assert paris.next_after(T0) == datetime(2026, 3, 3, 2, 0, tzinfo=UTC)
    assert paris.next_after(datetime(2026, 7, 1, tzinfo=UTC)) == datetime(
        2026, 7, 1, 1, 0, tzinfo=UTC
    )


def test_cron_normalises_white_space_and_accepts_croniter_aliases() -> None:
    assert cron("  */5   *  * * * ").expression == "*/5 * * * *"
    assert cron("@hourly").next_after(T0 + S) == T0 + timedelta(hours=1)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("", "must be a cron expression"),
        (None, "must be a cron expression"),
        (5, "must be a cron expression"),
        ("* * *", "is not a valid cron expression"),
        ("61 * * * *", "is not a valid cron expression"),
        ("*/0 * * * *", "is not a valid cron expression"),
        ("every day", "is not a valid cron expression"),
        ("0 0 30 2 *", "never matches a date"),
    ],
)
def test_a_bad_cron_expression_is_refused_naming_it(expression: Any, problem: str) -> None:
    with pytest.raises(ValueError, match="cron") as info:
        cron(expression)
    assert problem in str(info.value)


# --- which ticks are due ------------------------------------------------------------------


def test_due_ticks_on_time_is_the_latest_tick_not_yet_enqueued() -> None:
    every = cron("* * * * *")
    since = T0 - timedelta(hours=1)
    kw: dict[str, Any] = {"since": since, "catch_up": False}
    assert due_ticks(every, now=T0 + 2 * S, last_tick=T0 - timedelta(minutes=1), **kw) == [T0]
    assert due_ticks(every, now=T0 + 2 * S, last_tick=T0, **kw) == []
    assert due_ticks(every, now=T0 + 2 * S, last_tick=None, **kw) == [T0]


def test_due_ticks_skips_a_tick_nobody_saw_within_the_grace() -> None:
    every = cron("* * * * *")
    late = T0 + timedelta(seconds=11)  # the default grace is 10 s
    assert due_ticks(every, now=late, last_tick=None, since=T0, catch_up=False) == []
    assert due_ticks(every, now=late, last_tick=None, since=T0, catch_up=False, grace=20 * S) == [
        T0
    ]


def test_due_ticks_catch_up_enqueues_only_the_last_missed_tick() -> None:
    every = cron("* * * * *")
    last = T0 - timedelta(hours=2)
    now = T0 + 30 * S  # ticks T0-2h+1m … T0 were missed while no worker ran
    due = due_ticks(every, now=now, last_tick=last, since=last, catch_up=True)
    assert due == [T0]
    # a tick still on time comes after the caught-up one
    due = due_ticks(every, now=T0 + 3 * S, last_tick=last, since=last, catch_up=True)
    assert due == [T0 - timedelta(minutes=1), T0]


def test_due_ticks_catch_up_ignores_ticks_from_before_the_schedule_was_known() -> None:
    every = cron("0 3 * * *")
    first_seen = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    due = due_ticks(every, now=first_seen, last_tick=None, since=first_seen, catch_up=True)
    assert due == []


def test_due_ticks_of_a_seconds_schedule_seen_late_are_every_tick_within_the_grace() -> None:
    every2s = cron("* * * * * */2")
    due = due_ticks(every2s, now=T0 + 5 * S, last_tick=T0 - 10 * S, since=T0, catch_up=False)
    assert due == [T0 - 4 * S, T0 - 2 * S, T0, T0 + 2 * S, T0 + 4 * S]


# --- registering in code ------------------------------------------------------------------


def test_task_cron_registers_a_schedule_named_by_its_kind(task_registry: Registry) -> None:
    @task(cron="*/5 * * * *", kind="tests.unit.report")
    def report() -> None:
        return None

    (schedule,) = task_registry.schedules()
    assert (schedule.name, schedule.kind, schedule.expression) == (
        "tests.unit.report",
        "tests.unit.report",
        "*/5 * * * *",
    )
    assert schedule.tz is None  # the project's TIME_ZONE, read when used
    with override_settings(TIME_ZONE="Europe/Paris"):
        assert schedule.timezone_name == "Europe/Paris"


def test_a_task_class_with_cron_is_scheduled_with_its_field_defaults(
    task_registry: Registry,
) -> None:
    @dataclass
    class Digest(Task):
        kind = "tests.unit.digest"
        cron = "0 * * * *"
        full: bool = True

        def run(self, ctx: Context) -> None:
            return None

    (schedule,) = schedules()
    assert schedule.kind == "tests.unit.digest"
    assert schedule.payload() == {"full": True}


def test_a_task_class_with_cron_and_a_required_field_fails_when_schedules_are_read(
    task_registry: Registry,
) -> None:
    @dataclass
    class Needs(Task):
        kind = "tests.unit.needs"
        cron = "0 * * * *"
        account_id: int

        def run(self, ctx: Context) -> None:
            return None

    with pytest.raises(InvalidArguments, match=r"tests\.unit\.needs.*account_id"):
        schedules()


def test_periodic_takes_a_task_a_task_class_or_a_kind_with_arguments(
    task_registry: Registry,
) -> None:
    @task(kind="tests.unit.add")
    def add(a: int, b: int = 0) -> int:
        return a + b

    @dataclass
    class Sync(Task):
        kind = "tests.unit.sync"
        account: int

        def run(self, ctx: Context) -> None:
            return None

    first = periodic(add, "0 * * * *", args=[1], kwargs={"b": 2}, name="add-hourly")
    second = periodic("tests.unit.add", "30 * * * *", args=(5,), timezone="Asia/Tokyo")
    third = periodic(Sync, "@daily", kwargs={"account": 7}, catch_up=True)
    assert first.payload() == {"a": 1, "b": 2}
    assert second.name == "tests.unit.add"
    assert second.timezone_name == "Asia/Tokyo"
    assert third.payload() == {"account": 7}
    assert third.catch_up
    assert [s.name for s in schedules()] == ["add-hourly", "tests.unit.add", "tests.unit.sync"]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda t: periodic(t, "bad cron"), InvalidOption, "every-minute: cron: 'bad cron' is"),
        (lambda t: periodic(t, "* * * * *", timezone="Mars/Olympus"), InvalidOption, "Mars"),
        (lambda t: periodic(t, "* * * * *", timezone=3), InvalidOption, "time zone"),
        (lambda t: periodic(t, "* * * * *", args=[object()]), InvalidPayload, "'n'"),
        (lambda t: periodic(t, "* * * * *", kwargs={"n": {1, 2}}), InvalidPayload, "'n'"),
        (lambda t: periodic(t, "* * * * *", args=[1, 2]), InvalidArguments, "too many"),
        (lambda t: periodic(t, "* * * * *", kwargs={"m": 1}), InvalidArguments, "'m'"),
        (lambda t: periodic(t, "* * * * *", args="12"), InvalidArguments, "args must be"),
        (lambda t: periodic(t, "* * * * *", kwargs=[1]), InvalidArguments, "kwargs must be"),
        (lambda t: periodic(t, "* * * * *", catch_up="yes"), InvalidOption, "catch_up"),
        (lambda t: periodic(t, "* * * * *", name=""), InvalidOption, "schedule name"),
        (lambda t: periodic("tests.unit.nope", "* * * * *"), UnknownKind, "tests.unit.nope"),
        (lambda t: periodic(print, "* * * * *"), InvalidArguments, "not builtin_function"),
    ],
)
def test_periodic_refuses_a_bad_schedule_at_registration_naming_the_problem(
    task_registry: Registry, call: Any, error: type[Exception], message: str
) -> None:
    @task(kind="every-minute")
    def tick(n: int = 0) -> None:
        return None

    with pytest.raises(error, match=message):
        call(tick)
    assert task_registry.schedules() == []


def test_a_schedule_name_used_twice_is_refused_unless_it_is_the_same_schedule(
    task_registry: Registry,
) -> None:
    @task(kind="tests.unit.twice")
    def twice(n: int = 0) -> None:
        return None

    periodic(twice, "* * * * *")
    periodic(twice, "* * * * *")  # the same module imported again: fine
    with pytest.raises(InvalidOption, match=r"'tests\.unit\.twice' is already registered"):
        periodic(twice, "*/2 * * * *")
    periodic(twice, "*/2 * * * *", name="twice-every-2")
    assert len(task_registry.schedules()) == 2


def test_task_refuses_a_bad_cron_and_a_cron_on_a_task_that_needs_arguments(
    task_registry: Registry,
) -> None:
    with pytest.raises(InvalidOption, match="cron"):

        @task(cron="* * *")
        def bad() -> None:
            return None

    with pytest.raises(InvalidArguments, match="missing a required argument: 'user_id'"):

        @task(cron="* * * * *")
        def needs(user_id: int) -> None:
            return None


# --- the PERIODIC setting -----------------------------------------------------------------


def test_the_periodic_setting_is_read_into_checked_entries() -> None:
    settings = conf.validate(
        {
            "PERIODIC": [
                {"kind": "a.b", "cron": "*/5  * * * *"},
                {
                    "kind": "a.b",
                    "cron": "0 3 * * *",
                    "args": [1],
                    "kwargs": {"x": "y"},
                    "timezone": "Europe/Paris",
                    "catch_up": True,
                    "name": "nightly",
                },
            ]
        }
    )
    first, second = settings.periodic
    assert (first.name, first.cron, first.args, first.kwargs) == ("a.b", "*/5 * * * *", (), {})
    assert (second.name, second.timezone, second.catch_up) == ("nightly", "Europe/Paris", True)


@pytest.mark.parametrize(
    ("periodic_setting", "message"),
    [
        ({"kind": "a.b"}, r"PERIODIC must be a list"),
        (["a.b"], r"PERIODIC\[0\] must be a dict"),
        ([{"cron": "* * * * *"}], r"PERIODIC\[0\] needs a 'kind'"),
        ([{"kind": "a.b"}], r"PERIODIC\[0\] needs a 'cron'"),
        ([{"kind": "a.b", "cron": "* * * * *", "every": 5}], r"unknown key\(s\) 'every'"),
        ([{"kind": "a.b", "cron": "61 * * * *"}], r"PERIODIC\[0\] \('a.b'\) cron: '61"),
        (
            [{"kind": "a.b", "cron": "* * * * *", "timezone": "Mars/Olympus"}],
            r"unknown time zone 'Mars/Olympus'",
        ),
        ([{"kind": "a.b", "cron": "* * * * *", "args": {"x": 1}}], r"args must be a list"),
        ([{"kind": "a.b", "cron": "* * * * *", "kwargs": [1]}], r"kwargs must be a dict"),
        (
            [{"kind": "a.b", "cron": "* * * * *", "args": [1, {2, 3}]}],
            r"args\[1\] cannot be stored as JSON",
        ),
        (
            [{"kind": "a.b", "cron": "* * * * *", "kwargs": {"when": datetime.now}}],
            r"kwargs\['when'\] cannot be stored as JSON",
        ),
        ([{"kind": "a.b", "cron": "* * * * *", "catch_up": 1}], r"catch_up must be True"),
        (
            [{"kind": "a.b", "cron": "* * * * *"}, {"kind": "a.b", "cron": "0 * * * *"}],
            r"PERIODIC\[1\]: the schedule name 'a.b' is already used by PERIODIC\[0\]",
        ),
    ],
)
def test_a_bad_periodic_setting_is_a_configuration_error_naming_the_entry(
    periodic_setting: Any, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        conf.validate({"PERIODIC": periodic_setting})
    assert info.value.key == "PERIODIC"


def test_a_periodic_setting_naming_an_unknown_kind_fails_when_schedules_are_read(
    task_registry: Registry,
) -> None:
    with (
        override_settings(JOBQUEUE={"PERIODIC": [{"kind": "nowhere.task", "cron": "@daily"}]}),
        pytest.raises(ConfigurationError, match=r"PERIODIC\[0\] \('nowhere.task'\): No task"),
    ):
        schedules()


def test_a_periodic_setting_becomes_the_schedule_conf_checked(task_registry: Registry) -> None:
    """conf reads and checks the entry once; the schedule is that entry as it was read
    (the cron's spacing normalised, the zone by name), with the kind looked up."""

    @task(kind="tests.unit.nightly")
    def nightly(n: int, label: str = "") -> None:
        return None

    setting = {
        "kind": "tests.unit.nightly",
        "cron": " 0  3 * * * ",
        "args": [7],
        "kwargs": {"label": "x"},
        "timezone": "Europe/Paris",
        "catch_up": True,
        "name": "every-night",
    }
    with override_settings(JOBQUEUE={"PERIODIC": [setting]}):
        [entry] = conf.get().periodic
        [schedule] = schedules()
    assert (schedule.name, schedule.kind, schedule.expression) == (
        "every-night",
        "tests.unit.nightly",
        entry.cron,
    )
    assert entry.cron == "0 3 * * *"
    assert schedule.tz == ZoneInfo("Europe/Paris")
    assert (schedule.args, schedule.kwargs, schedule.catch_up) == ((7,), {"label": "x"}, True)
    assert schedule.source == "settings"
    assert schedule.payload() == {"n": 7, "label": "x"}


def test_a_periodic_setting_with_arguments_its_task_does_not_take_is_refused(
    task_registry: Registry,
) -> None:
    @task(kind="tests.unit.one")
    def one(n: int) -> None:
        return None

    bad = {"PERIODIC": [{"kind": "tests.unit.one", "cron": "@daily", "kwargs": {"n": 1, "m": 1}}]}
    with (
        override_settings(JOBQUEUE=bad),
        pytest.raises(ConfigurationError, match=r"PERIODIC\[0\].*unexpected keyword.*'m'"),
    ):
        schedules()


def test_a_periodic_setting_and_code_may_not_share_a_schedule_name(
    task_registry: Registry,
) -> None:
    @task(kind="tests.unit.shared", cron="@hourly")
    def shared() -> None:
        return None

    clash = {"PERIODIC": [{"kind": "tests.unit.shared", "cron": "@daily"}]}
    with (
        override_settings(JOBQUEUE=clash),
        pytest.raises(ConfigurationError, match="also registered in code"),
    ):
        schedules()
    renamed = {"PERIODIC": [{"kind": "tests.unit.shared", "cron": "@daily", "name": "daily"}]}
    with override_settings(JOBQUEUE=renamed):
        assert [(s.name, s.source) for s in schedules()] == [
            ("tests.unit.shared", "code"),
            ("daily", "settings"),
        ]
