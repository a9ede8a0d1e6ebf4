from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.test import override_settings

from django_jobqueue import ConfigurationError, conf


def test_defaults() -> None:
    settings = conf.validate({})
    assert settings.lease == timedelta(minutes=1)
    assert settings.poll_interval == timedelta(seconds=5)
    assert settings.shutdown_timeout == timedelta(seconds=30)
    assert settings.priority_ratio == 4
    assert settings.max_failures == 25
    assert settings.backoff_base == timedelta(seconds=1)
    assert settings.backoff_cap == timedelta(hours=1)
    assert settings.backoff_jitter == 0.2
    assert 1 <= settings.concurrency <= 8
    assert settings.database == "default"


def test_numbers_are_seconds_and_timedeltas_pass_through() -> None:
    assert conf.validate({"LEASE": "5m"}).lease == timedelta(minutes=5)  # as the CLI takes it
    settings = conf.validate({"LEASE": 90, "POLL_INTERVAL": timedelta(seconds=2)})
    assert settings.lease == timedelta(seconds=90)
    assert settings.poll_interval == timedelta(seconds=2)


def test_unknown_key_is_rejected_with_the_known_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"Unknown JOBQUEUE key\(s\): LEASE_TIME.*LEASE"):
        conf.validate({"LEASE_TIME": 5})


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"LEASE": 0}, "LEASE"),
        ({"LEASE": "15 minutes"}, "LEASE"),  # "15m" is a duration, as on the command line
        ({"POLL_INTERVAL": -1}, "POLL_INTERVAL"),
        ({"SHUTDOWN_TIMEOUT": True}, "SHUTDOWN_TIMEOUT"),
        ({"CONCURRENCY": 0}, "CONCURRENCY"),
        ({"PROCESSES": 0}, "PROCESSES"),
        ({"PROCESSES": "all"}, "PROCESSES"),
        ({"PROCESSES": True}, "PROCESSES"),
        ({"POOL": "prefork"}, "POOL"),
        ({"POOL": None}, "POOL"),
        ({"KIND_CONCURRENCY": {"a.b": 0}}, "KIND_CONCURRENCY['a.b']"),
        ({"KIND_CONCURRENCY": ["a"]}, "KIND_CONCURRENCY"),
        ({"PRIORITY_RATIO": 0}, "PRIORITY_RATIO"),
        ({"MAX_FAILURES": -3}, "MAX_FAILURES"),
        ({"BACKOFF_JITTER": 1.5}, "BACKOFF_JITTER"),
        ({"BACKOFF_BASE": 10, "BACKOFF_CAP": 5}, "BACKOFF_CAP"),
        ({"DATABASE": "nope"}, "DATABASE"),
        ({"LISTEN_DATABASE": "nope"}, "LISTEN_DATABASE"),
        ({"LISTEN_DATABASE": 5}, "LISTEN_DATABASE"),
        ({"RETENTION": {"pending": 5}}, "RETENTION"),
        ({"HISTORY_DAYS": -1}, "HISTORY_DAYS"),
        ({"HISTORY_DAYS": 1.5}, "HISTORY_DAYS"),
        ({"HISTORY_DAYS": 400}, "HISTORY_DAYS"),
        ({"HISTORY_DAYS": True}, "HISTORY_DAYS"),
        ({"HEALTH_HORIZON_AGE": 0}, "HEALTH_HORIZON_AGE"),
        ({"HEALTH_HORIZON_AGE": "soon"}, "HEALTH_HORIZON_AGE"),
        ({"HEALTH_DEAD_RATIO": 2}, "HEALTH_DEAD_RATIO"),
        ({"HEALTH_DEAD_RATIO": "20%"}, "HEALTH_DEAD_RATIO"),
        ({"JOURNAL_PERIOD": "year"}, "JOURNAL_PERIOD"),
        ({"JOURNAL_PARTITIONS_AHEAD": 0}, "JOURNAL_PARTITIONS_AHEAD"),
        ({"JOURNAL_PARTITIONS_AHEAD": "7"}, "JOURNAL_PARTITIONS_AHEAD"),
        ({"JOURNAL_RETENTION": 0}, "JOURNAL_RETENTION"),
        ({"JOURNAL_RETENTION": "a month"}, "JOURNAL_RETENTION"),
        ({"JOURNAL_ANALYZE_INTERVAL": 0}, "JOURNAL_ANALYZE_INTERVAL"),
    ],
)
def test_invalid_values_name_the_key(raw: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        conf.validate(raw)
    assert str(info.value).startswith(key)


def test_history_and_health_settings_have_their_documented_defaults() -> None:
    settings = conf.validate({})
    assert settings.history_days == 7
    assert settings.health_horizon_age == timedelta(minutes=5)
    assert settings.health_dead_ratio == 0.2
    chosen = conf.validate({"HISTORY_DAYS": 0, "HEALTH_HORIZON_AGE": 30, "HEALTH_DEAD_RATIO": 1})
    assert chosen.history_days == 0
    assert chosen.health_horizon_age == timedelta(seconds=30)
    assert chosen.health_dead_ratio == 1.0


def test_the_partitioned_journal_keeps_entries_for_the_longest_retention_unless_told() -> None:
    assert conf.validate({}).journal_retention is None  # no RETENTION: kept forever
    days = {"completed": timedelta(days=7), "dead": timedelta(days=30)}
    assert conf.validate({"RETENTION": days}).journal_retention == timedelta(days=30)
    told = conf.validate({"RETENTION": days, "JOURNAL_RETENTION": timedelta(days=90)})
    assert told.journal_retention == timedelta(days=90)
    assert (told.journal_period, told.journal_partitions_ahead) == ("day", 7)
    assert told.journal_analyze_interval == timedelta(hours=1)


def test_none_disables_priority_ratio_and_max_failures() -> None:
    settings = conf.validate({"PRIORITY_RATIO": None, "MAX_FAILURES": None})
    assert settings.priority_ratio is None
    assert settings.max_failures is None


# DATABASES is overridden only to add an alias that nothing connects to.
@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_listen_database_defaults_to_the_jobs_database() -> None:
    assert conf.validate({}).listen_database == "default"
    databases = django_settings.DATABASES
    with override_settings(DATABASES={**databases, "direct": databases["default"]}):
        assert conf.validate({"LISTEN_DATABASE": "direct"}).listen_database == "direct"


def test_override_settings_is_picked_up() -> None:
    with override_settings(JOBQUEUE={"LEASE": 42}):
        assert conf.get().lease == timedelta(seconds=42)
    assert conf.get().lease == timedelta(minutes=1)


def test_invalid_settings_fail_the_system_check_naming_the_key() -> None:
    with (
        override_settings(JOBQUEUE={"LEASE": -5}),
        pytest.raises(SystemCheckError, match="LEASE must be positive"),
    ):
        call_command("check")


def test_runworker_refuses_to_start_with_invalid_settings() -> None:
    with (
        override_settings(JOBQUEUE={"POLL_INTERVAL": "soon"}),
        pytest.raises(CommandError, match="POLL_INTERVAL"),
    ):
        call_command("runworker", "--burst")


def test_sqlite_without_immediate_transactions_gets_a_warning() -> None:
    from django_jobqueue.checks import database_warnings

    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.sqlite3"}
    [warning] = database_warnings("default", sqlite)
    assert warning.id == "django_jobqueue.W001"
    assert "transaction_mode" in warning.hint
    immediate = {**sqlite, "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    assert database_warnings("default", immediate) == []
    assert database_warnings("default", {"ENGINE": "django.db.backends.postgresql"}) == []


def test_a_misspelt_key_is_refused_with_the_key_it_is_near() -> None:
    with pytest.raises(
        ConfigurationError, match=r"Unknown JOBQUEUE key\(s\): LEASES \(did you mean 'LEASE'\?\)"
    ):
        conf.validate({"LEASES": 5})


def test_processes_takes_a_count_or_auto_for_the_cpus() -> None:
    assert conf.validate({}).processes == 1
    assert conf.validate({"PROCESSES": 3}).processes == 3
    assert conf.validate({"PROCESSES": "auto"}).processes == max(1, os.cpu_count() or 1)
