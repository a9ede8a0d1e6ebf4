"""Debounce (a trailing edge with a most wait), the per-key enqueue rate, and bad per-key
input refused before anything is written (issue 23)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from django_jobqueue import InvalidOption, Outcome, RateLimited, set_limit, task
from django_jobqueue.errors import ConfigurationError, InvalidLimit
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.task import limiting
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.taskapp import tasks

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite]


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiting.forget()
    yield
    limiting.forget()


def test_debounce_runs_at_most_every_max_wait_and_always_after_the_last_enqueue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """50 enqueues 1 s apart, debounce 5 s, max_wait 20 s: a run every 20 s while they
    keep coming, and one 5 s after the last."""
    base = timezone.now()
    runs: list[float] = []

    def at(second: float) -> datetime:
        moment = base + timedelta(seconds=second)
        monkeypatch.setattr(timezone, "now", lambda: moment)
        return moment

    def run_due(second: float) -> None:
        if run_jobs(kinds=[tasks.keyed], now=at(second)):
            runs.append(second)

    debounced = tasks.keyed.using(
        dedup_key="user:1", debounce=timedelta(seconds=5), max_wait=timedelta(seconds=20)
    )
    for second in range(50):
        run_due(second)
        debounced.enqueue(n=second)
    for second in range(50, 80):
        run_due(second)
    assert runs == [20, 40, 54]
    gaps = [b - a for a, b in zip([0, *runs], runs, strict=False)]
    assert max(gaps) <= 20
    assert runs[-1] >= 49 + 5  # the last enqueue was followed by a run
    assert JournalEntry.objects.filter(outcome=Outcome.MERGED).count() == 50 - len(runs)


def test_debounce_alone_runs_once_quiet_for_the_debounce(monkeypatch: pytest.MonkeyPatch) -> None:
    base = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: base)
    bound = tasks.keyed.using(dedup_key="k", debounce=timedelta(seconds=30))
    first = bound.enqueue(n=1)
    later = base + timedelta(seconds=10)
    monkeypatch.setattr(timezone, "now", lambda: later)
    second = bound.enqueue(n=2)
    assert second.id == first.id  # merged
    assert Job.objects.get(id=first.id).visible_at == later + timedelta(seconds=30)


def test_rate_limit_per_key_limits_each_key_apart() -> None:
    tasks.rated_per_key.using(key="a").enqueue(n=1)
    tasks.rated_per_key.using(key="a").enqueue(n=2)
    with pytest.raises(RateLimited, match="key 'a'"):
        tasks.rated_per_key.using(key="a").enqueue(n=3)
    tasks.rated_per_key.using(key="b").enqueue(n=1)  # another key's own bucket
    tasks.rated_per_key.enqueue(n=9)  # no key: no per-key rate
    assert Job.objects.filter(kind=tasks.rated_per_key.kind).count() == 4
    with pytest.raises(RateLimited):
        tasks.rated_per_key.using(key="b").enqueue_many([{"n": 1}, {"n": 2}])
    assert Job.objects.filter(kind=tasks.rated_per_key.kind).count() == 4  # none of the batch


def test_rate_limit_per_key_from_the_settings() -> None:
    limits = {tasks.keyed.kind: {"rate_limit_per_key": "1/h"}}
    with override_settings(JOBQUEUE={"LIMITS": limits}):
        tasks.keyed.using(key="t").enqueue(n=1)
        with pytest.raises(RateLimited):
            tasks.keyed.using(key="t").enqueue(n=2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": 42}, "key"),
        ({"key": "x" * 256}, "key"),
        ({"dedup_key": ["a"]}, "dedup_key"),
        ({"debounce": timedelta(seconds=5)}, "debounce needs a dedup_key"),
        ({"dedup_key": "a", "debounce": -1}, "debounce"),
        ({"dedup_key": "a", "max_wait": timedelta(seconds=5)}, "max_wait needs a debounce"),
        (
            {"dedup_key": "a", "debounce": timedelta(seconds=9), "max_wait": timedelta(seconds=5)},
            "at least the debounce",
        ),
        (
            {"dedup_key": "a", "debounce": timedelta(seconds=9), "delay": timedelta(seconds=1)},
            "not both",
        ),
    ],
)
def test_bad_per_key_enqueue_options_are_refused_and_nothing_is_written(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidOption, match=message):
        tasks.keyed.using(**options).enqueue(n=1)
    assert not Job.objects.exists()


def test_a_key_callable_that_raises_or_returns_a_non_string_is_named() -> None:
    with registry.isolated():
        raising = task(kind="tests.raising_key", key=lambda n, **_: 1 / n)(lambda n: n)
        with pytest.raises(InvalidOption, match="key callable raised ZeroDivisionError"):
            raising.enqueue(n=0)
        bad = task(kind="tests.bad_key", key=lambda n, **_: n)(lambda n: n)
        with pytest.raises(InvalidOption, match="key its key callable returned"):
            bad.enqueue(n=5)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": "shop"}, "key must be a callable"),
        ({"max_in_flight_per_key": 0}, "max_in_flight_per_key"),
        ({"ordered": "yes"}, "ordered"),
        ({"fair": 1}, "fair"),
        ({"rate_limit_per_key": "lots"}, "rate_limit_per_key"),
    ],
)
def test_bad_per_key_task_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidOption, match=message):
        task(kind="tests.never_registered", **options)(lambda: None)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"max_in_flight_per_key": -1}, "max_in_flight_per_key"),
        ({"fair": "on"}, "fair"),
        ({"rate_limit_per_key": "5/fortnight"}, "rate_limit_per_key"),
    ],
)
def test_bad_per_key_settings_are_refused(entry: dict[str, object], message: str) -> None:
    from django_jobqueue import conf

    with (
        override_settings(JOBQUEUE={"LIMITS": {tasks.keyed.kind: entry}}),
        pytest.raises(ConfigurationError, match=message),
    ):
        conf.get()


def test_set_limit_sets_and_lifts_per_key_limits_and_refuses_bad_ones() -> None:
    kind = tasks.keyed.kind
    limits = set_limit(kind, max_in_flight_per_key=3, fair=True, rate_limit_per_key="5/s")
    assert limits.per_key["max_in_flight_per_key"] == 3
    assert limits.per_key_from["fair"] == "database"
    assert limits.rule() is not None
    assert limiting.claim_limits([kind], max_age=0)[1][kind].most == 3
    lifted = set_limit(kind, max_in_flight_per_key=None, fair=None)
    assert lifted.per_key["max_in_flight_per_key"] is None
    with pytest.raises(InvalidLimit, match="ordered"):
        set_limit(kind, ordered="sometimes")
    with pytest.raises(InvalidLimit, match="max_in_flight_per_key"):
        set_limit(kind, max_in_flight_per_key=0)
