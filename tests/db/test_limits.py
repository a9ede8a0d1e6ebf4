"""Global limits per kind: the enqueue rate limit (RateLimited, nothing written, in the
caller's transaction, in bulk), max_in_flight inside the claim (its statement, its lock),
where each limit comes from, changing them at run time, and the bad values refused."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_jobqueue import (
    ConfigurationError,
    InvalidLimit,
    InvalidOption,
    RateLimited,
    clear_limit,
    conf,
    enqueue_many,
    job_enqueued,
    limits,
    periodic,
    set_limit,
    store,
    task,
)
from django_jobqueue.models import Job, JournalEntry, KindLimit, RateBucket, Schedule, Status
from django_jobqueue.task import limiting
from django_jobqueue.task.registry import Registry
from django_jobqueue.testing import captured_jobs
from django_jobqueue.validation import Rate
from tests.helpers import (
    WorkerThread,
    backend_pid,
    in_thread,
    postgres_only,
    run_burst,
    wait_for,
    waits_on_lock_held_by,
)
from tests.taskapp import tasks
from tests.taskapp.models import Execution

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

LIMITED = tasks.limited.kind
RATED = tasks.rated.kind
SETTINGS = {"POLL_INTERVAL": 1, "BACKOFF_BASE": 0, "BACKOFF_CAP": 0}


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    """Each test reads the run-time limits afresh (a process keeps them for seconds)."""
    limiting.forget()
    yield
    limiting.forget()


def counts() -> tuple[int, int, int]:
    return Job.objects.count(), JournalEntry.objects.count(), RateBucket.objects.count()


# --- the enqueue rate limit -------------------------------------------------------------


def test_enqueue_beyond_the_rate_raises_rate_limited_and_writes_nothing() -> None:
    for n in range(3):
        tasks.rated.enqueue(n)
    before = counts()
    tokens = RateBucket.objects.get(kind=RATED).tokens
    with pytest.raises(RateLimited) as raised:
        tasks.rated.enqueue(99)
    assert counts() == before  # no job row, no journal entry
    assert RateBucket.objects.get(kind=RATED).tokens == tokens  # nothing taken either
    error = raised.value
    assert error.kind == RATED
    assert error.rate == "3/m"
    assert error.retry_after is not None
    assert 0 < error.retry_after <= 20
    assert "tests.rated: rate limit 3/m reached" in str(error)
    assert list(Job.objects.filter(kind=RATED).values_list("payload__n", flat=True)) == [0, 1, 2]


@pytest.mark.django_db(transaction=True)  # job_enqueued is sent on a real commit
def test_a_rate_limited_enqueue_sends_no_signal_and_is_not_captured() -> None:
    heard: list[object] = []

    def receiver(**kwargs: object) -> None:
        heard.append(kwargs["job"])

    job_enqueued.connect(receiver, weak=False)
    try:
        with captured_jobs() as captured:
            tasks.rated.enqueue_many([{"n": n} for n in range(3)])
            with pytest.raises(RateLimited):
                tasks.rated.enqueue(3)
            with pytest.raises(RateLimited):
                tasks.rated.enqueue_many([{"n": 4}])
    finally:
        job_enqueued.disconnect(receiver)
    assert len(captured) == 3
    assert len(heard) == 3


def test_rate_limited_is_an_enqueue_error_and_a_class_task_s_attribute_applies() -> None:
    tasks.RatedSync(account_id=1).enqueue()
    tasks.RatedSync(account_id=2).enqueue()
    with pytest.raises(RateLimited, match=r"tests.rated_sync: rate limit 2/h"):
        tasks.RatedSync(account_id=3).enqueue()
    assert Job.objects.filter(kind="tests.rated_sync").count() == 2


def test_the_token_of_an_enqueue_rolled_back_with_its_transaction_is_given_back() -> None:
    class Rollback(Exception):
        pass

    def three_then_fail() -> None:
        with transaction.atomic():
            for n in range(3):
                tasks.rated.enqueue(n)
            raise Rollback

    with pytest.raises(Rollback):
        three_then_fail()
    assert Job.objects.filter(kind=RATED).count() == 0
    for n in range(3):  # the three tokens are all there again
        tasks.rated.enqueue(n)
    with pytest.raises(RateLimited):
        tasks.rated.enqueue(3)


def test_rate_limited_leaves_the_callers_transaction_usable() -> None:
    with transaction.atomic():
        for n in range(3):
            tasks.rated.enqueue(n)
        with pytest.raises(RateLimited):
            tasks.rated.enqueue(3)
        tasks.noop.enqueue()  # the transaction goes on, and commits
    assert Job.objects.filter(kind=RATED).count() == 3
    assert Job.objects.filter(kind=tasks.noop.kind).count() == 1


def test_bulk_enqueue_takes_its_tokens_all_at_once_or_writes_nothing() -> None:
    with override_settings(JOBQUEUE={**SETTINGS, "LIMITS": {RATED: {"rate_limit": "5/m"}}}):
        assert len(tasks.rated.enqueue_many([{"n": n} for n in range(3)])) == 3
        before = counts()
        with pytest.raises(RateLimited, match="3 jobs can be enqueued again in") as raised:
            tasks.rated.enqueue_many([{"n": n} for n in range(3)])  # 2 tokens left
        assert counts() == before
        assert raised.value.retry_after is not None
        assert raised.value.retry_after > 0
        with pytest.raises(RateLimited, match="more than its rate limit 5/m ever lets") as never:
            tasks.rated.enqueue_many([{"n": n} for n in range(6)])
        assert never.value.retry_after is None
        assert counts() == before
        tasks.rated.enqueue_many([{"n": 3}, {"n": 4}])  # the two left
        assert Job.objects.filter(kind=RATED).count() == 5


def test_a_mixed_bulk_enqueue_is_all_or_nothing_across_kinds() -> None:
    tasks.RatedSync(account_id=1).enqueue()
    tasks.RatedSync(account_id=2).enqueue()  # its bucket is empty now
    with pytest.raises(RateLimited, match=r"tests\.rated_sync"):
        enqueue_many([tasks.Sync(account_id=7), tasks.RatedSync(account_id=3)])
    assert Job.objects.filter(kind="tests.sync").count() == 0
    assert Job.objects.filter(kind="tests.rated_sync").count() == 2


def test_idempotent_reuse_counts_against_the_rate_too() -> None:
    first = tasks.rated.using(idempotency_key="k").enqueue(1)
    assert tasks.rated.using(idempotency_key="k").enqueue(1).id == first.id
    tasks.rated.enqueue(2)
    with pytest.raises(RateLimited):
        tasks.rated.using(idempotency_key="k").enqueue(1)


def test_a_periodic_tick_over_its_kinds_rate_is_not_enqueued_nor_recorded(
    task_registry: Registry,
) -> None:
    @task(kind="tests.rated_beat", rate_limit="2/h")
    def beat() -> None:
        return None

    schedule = periodic(beat, "* * * * *", timezone="UTC")
    t0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    ticks = [t0 + timedelta(minutes=n) for n in range(3)]
    for tick in ticks[:2]:
        assert store.record_tick(name=schedule.name, tick=tick, request=schedule.request(tick))
    with pytest.raises(RateLimited, match=r"tests\.rated_beat: rate limit 2/h"):
        store.record_tick(name=schedule.name, tick=ticks[2], request=schedule.request(ticks[2]))
    assert Job.objects.filter(kind="tests.rated_beat").count() == 2
    assert Schedule.objects.get(name=schedule.name).last_tick == ticks[1]


def test_kinds_without_a_rate_limit_write_no_bucket() -> None:
    for _ in range(10):
        tasks.noop.enqueue()
    tasks.noop.enqueue_many([{}] * 10)
    assert RateBucket.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_token_and_the_job_commit_together() -> None:
    assert not connections["default"].in_atomic_block
    for n in range(3):
        tasks.rated.enqueue(n)
    with pytest.raises(RateLimited):
        tasks.rated.enqueue(3)
    assert Job.objects.filter(kind=RATED).count() == 3
    assert RateBucket.objects.get(kind=RATED).tokens < 1


@pytest.mark.django_db(transaction=True)
def test_a_signature_made_on_an_event_loop_reads_the_limits_off_the_loop() -> None:
    """An async task or view builds a workflow's signatures in its coroutine: a copy of
    the limits gone stale there was read on the loop's thread, and Django refused it
    (``SynchronousOnlyOperation``: an async parent's run died now and then, when its
    run outlasted the copy). The read goes to a thread of its own, and what it reads is
    the limits in force."""
    set_limit(RATED, rate_limit="5/h")
    limiting.forget()  # as stale as can be

    async def build() -> Any:
        return tasks.rated.s(0), limiting.rate_for(RATED, None)

    signature, rate = asyncio.run(build())
    assert signature.kind == RATED
    assert rate == Rate(5, 3600)


@pytest.mark.django_db(transaction=True)
def test_the_rate_holds_across_threads_enqueueing_at_once() -> None:
    """Eight sessions race for a bucket of five: five jobs, three RateLimited."""
    set_limit(RATED, rate_limit="5/h")
    start = threading.Barrier(8)

    def one() -> str:
        start.wait(10)
        try:
            tasks.rated.enqueue(0)
        except RateLimited:
            return "limited"
        return "enqueued"

    futures = [in_thread(one) for _ in range(8)]
    results = sorted(f.result(30) for f in futures)
    assert results == ["enqueued"] * 5 + ["limited"] * 3
    assert Job.objects.filter(kind=RATED).count() == 5


# --- where a limit comes from, and changing it at run time -------------------------------


def test_precedence_database_over_settings_over_the_task() -> None:
    assert limiting.resolve(RATED).rate_limit == Rate(3, 60)
    assert limiting.resolve(RATED).rate_limit_from == "task"
    configured = {**SETTINGS, "LIMITS": {RATED: {"rate_limit": "1/m", "max_in_flight": 4}}}
    with override_settings(JOBQUEUE=configured):
        found = limiting.resolve(RATED)
        assert (str(found.rate_limit), found.rate_limit_from) == ("1/m", "settings")
        assert (found.max_in_flight, found.max_in_flight_from) == (4, "settings")
        tasks.rated.enqueue()
        with pytest.raises(RateLimited, match="1/m"):
            tasks.rated.enqueue()
        now = set_limit(RATED, rate_limit="10/s", actor="ops")
        assert (str(now.rate_limit), now.rate_limit_from) == ("10/s", "database")
        assert (now.max_in_flight, now.max_in_flight_from) == (4, "settings")  # not given
        lifted = set_limit(RATED, rate_limit=None)
        assert (lifted.rate_limit, lifted.rate_limit_from) == (None, "database")
        for _ in range(20):
            tasks.rated.enqueue()
        assert clear_limit(RATED) is True
        assert clear_limit(RATED) is False
        assert limiting.resolve(RATED).rate_limit_from == "settings"
    row_count = KindLimit.objects.count()
    assert row_count == 0


def test_set_limit_is_stored_with_who_set_it_and_listed() -> None:
    result = set_limit(LIMITED, max_in_flight=2, rate_limit="100/s", actor="ops")
    assert result.max_in_flight == 2
    assert str(result.rate_limit) == "100/s"
    row = KindLimit.objects.get(kind=LIMITED)
    assert (row.max_in_flight, row.rate_limit, row.changed_by) == (2, "100/s", "ops")
    listed = {k.kind: k for k in limits()}
    assert listed[LIMITED].max_in_flight == 2
    assert listed[RATED].rate_limit == Rate(3, 60)  # the task's option
    assert listed["tests.one_at_a_time"].max_in_flight == 1
    assert tasks.noop.kind not in listed
    set_limit(LIMITED, max_in_flight=5)
    assert str(limiting.resolve(LIMITED).rate_limit) == "100/s"  # kept


def test_a_process_rereads_the_run_time_limits_when_its_copy_is_old() -> None:
    assert limiting.rate_for(LIMITED, None) is None
    KindLimit.objects.create(kind=LIMITED, sets_rate_limit=True, rate_limit="1/h")
    assert limiting.rate_for(LIMITED, None) is None  # still the copy read a moment ago
    assert limiting.resolve(LIMITED, max_age=0).rate_limit == Rate(1, 3600)
    tasks.limited.enqueue(0)
    with pytest.raises(RateLimited):
        tasks.limited.enqueue(0)


def test_a_rate_written_badly_into_the_table_by_hand_is_ignored() -> None:
    KindLimit.objects.create(kind=LIMITED, sets_rate_limit=True, rate_limit="lots")
    assert limiting.resolve(LIMITED, max_age=0).rate_limit is None
    tasks.limited.enqueue(0)


# --- bad values ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_in_flight": 0}, "tests.limited: max_in_flight must be a positive integer or None"),
        ({"max_in_flight": -3}, "got -3"),
        ({"max_in_flight": True}, "got True"),
        ({"max_in_flight": "2"}, "got '2'"),
        ({"rate_limit": "abc/s"}, 'tests.limited: rate_limit must be a rate such as "100/s"'),
        ({"rate_limit": "0/s"}, "must allow at least 1 per s, got '0/s'"),
        ({"rate_limit": "10/d"}, "got '10/d'"),
        ({"rate_limit": 10}, "got 10"),
        ({}, "give max_in_flight or rate_limit"),
    ],
)
def test_set_limit_refuses_bad_values_naming_them(options: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidLimit, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        set_limit(LIMITED, **options)  # type: ignore[arg-type]
    assert e.value.kind == LIMITED
    assert not KindLimit.objects.exists()


def test_set_limit_refuses_an_unknown_kind() -> None:
    with pytest.raises(InvalidLimit, match=r"No task is registered under kind 'no\.such'") as e:
        set_limit("no.such", max_in_flight=2)
    assert e.value.kind == "no.such"
    assert not KindLimit.objects.exists()


def test_clear_limit_takes_an_unknown_kind_but_not_a_non_name() -> None:
    assert clear_limit("gone.kind") is False
    with pytest.raises(InvalidLimit, match="takes a kind name"):
        clear_limit("")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_in_flight": 0}, "bad.limits: max_in_flight must be a positive integer"),
        ({"max_in_flight": -1}, "got -1"),
        ({"rate_limit": "abc/s"}, 'bad.limits: rate_limit must be a rate such as "100/s"'),
        ({"rate_limit": "5 per second"}, "got '5 per second'"),
    ],
)
def test_task_options_refuse_bad_limits(
    task_registry: Registry, options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidOption, match=message) as e:

        @task(kind="bad.limits", **options)  # type: ignore[call-overload]
        def bad() -> None:
            return None

    assert e.value.option in {"max_in_flight", "rate_limit"}
    assert "bad.limits" not in task_registry


@pytest.mark.parametrize(
    ("limits_setting", "message"),
    [
        ([], "LIMITS must be a dict of kind"),
        ({"k": 2}, "LIMITS\\['k'\\] must be a dict"),
        ({"k": {"max_in_flight": 0}}, "LIMITS\\['k'\\]\\['max_in_flight'\\] must be a positive"),
        ({"k": {"rate_limit": "abc/s"}}, "LIMITS\\['k'\\]\\['rate_limit'\\] must be a rate"),
        ({"k": {"max_inflight": 2}}, "unknown key\\(s\\) 'max_inflight'; known: max_in_flight"),
    ],
)
def test_the_limits_setting_refuses_bad_values_naming_them(
    limits_setting: object, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as e:
        conf.validate({"LIMITS": limits_setting})
    assert e.value.key == "LIMITS"


@pytest.mark.django_db(transaction=True)
def test_a_worker_warns_of_a_limits_setting_naming_an_unknown_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limits_setting = {"no.such.kind": {"max_in_flight": 1}, LIMITED: {"max_in_flight": 1}}
    with override_settings(JOBQUEUE={**SETTINGS, "LIMITS": limits_setting}):
        run_burst()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (
        "JOBQUEUE['LIMITS'] names kind(s) no task is registered under, ignored: no.such.kind"
        in warnings
    )


def test_a_limits_setting_naming_an_unknown_kind_is_system_check_w005() -> None:
    limits_setting = {"tests.limitd": {"max_in_flight": 1}, LIMITED: {"max_in_flight": 1}}
    with override_settings(JOBQUEUE={**SETTINGS, "LIMITS": limits_setting}):
        found = [m for m in run_checks() if m.id == "django_jobqueue.W005"]
    assert [m.msg for m in found] == [
        "JOBQUEUE['LIMITS'] names kind 'tests.limitd', which no registered task has: "
        "the entry has no effect."
    ]


# --- max_in_flight inside the claim ------------------------------------------------------


def claim(worker: str, **options: object) -> list[store.Claimed]:
    return store.claim_jobs(
        worker_id=worker,
        request=store.ClaimRequest(limit=10, kinds=[LIMITED, tasks.noop.kind], **options),
    )


def test_a_claim_takes_no_more_than_max_in_flight_of_a_kind_across_workers() -> None:
    for _ in range(5):
        tasks.limited.enqueue(0)
    for _ in range(3):
        tasks.noop.enqueue()
    first = claim("a:1", max_in_flight={LIMITED: 2})
    assert sorted(c.kind for c in first).count(LIMITED) == 2
    assert sum(c.kind == tasks.noop.kind for c in first) == 3  # other kinds unaffected
    assert claim("b:2", max_in_flight={LIMITED: 2}) == []  # another worker: none left
    assert claim("b:2", max_in_flight={LIMITED: 3})[0].kind == LIMITED  # raised by one
    assert Job.objects.filter(kind=LIMITED, status=Status.CLAIMED).count() == 3


def test_max_in_flight_holds_across_priority_tiers_and_beside_a_worker_cap() -> None:
    for priority in (0, 1, 2, 1, 2, 0):
        tasks.limited.using(priority=priority).enqueue(0)
    got = claim("a:1", max_in_flight={LIMITED: 3}, preferring={1: 2, 2: 2})
    assert len(got) == 3
    got = claim("b:2", max_in_flight={LIMITED: 5}, kind_limits={LIMITED: 1})
    assert len(got) == 1  # the worker's own cap is the smaller
    got = claim("c:3", max_in_flight={LIMITED: 5}, kind_limits={LIMITED: 4}, preferring={2: 3})
    assert len(got) == 1  # the global one is: 5 less the 4 claimed


def test_a_settled_claim_frees_its_place() -> None:
    for _ in range(3):
        tasks.limited.enqueue(0)
    [a] = claim("a:1", max_in_flight={LIMITED: 1})
    assert claim("b:2", max_in_flight={LIMITED: 1}) == []
    Job.objects.filter(id=a.id).update(status=Status.COMPLETED, claimed_by="")
    assert len(claim("b:2", max_in_flight={LIMITED: 1})) == 1


def test_the_claim_statement_is_unchanged_without_limits() -> None:
    if connections["default"].vendor == "mysql":
        pytest.skip("MySQL/MariaDB: the count is a statement of its own, under a named lock")
    base = {"limit": 4, "kinds": [LIMITED, tasks.noop.kind], "now": timezone.now()}

    def built(**more: Any) -> tuple[str, list[Any]] | None:
        return store.claim_statement(worker_id="w:1", request=store.ClaimRequest(**base, **more))

    plain = built()
    assert plain is not None
    for same in ({}, {"other.kind": 2}):
        assert built(max_in_flight=same) == plain
    counts = (
        "django_jobqueue_free_slots("
        if connections["default"].vendor == "postgresql"
        else "WHERE status = 'claimed' AND kind = %s"
    )
    assert counts not in plain[0]
    limited = built(max_in_flight={LIMITED: 2})
    assert limited is not None
    assert counts in limited[0]


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_of_a_limited_kind_waits_for_another_and_counts_what_it_claimed() -> None:
    """Without the lock the second claim would skip the first one's locked rows and take
    two more; with it, it waits, then counts the first's two claims (committed while it
    waited) and takes none."""
    for _ in range(6):
        tasks.limited.enqueue(0)
    holder = backend_pid()
    with transaction.atomic():
        first = claim("a:1", max_in_flight={LIMITED: 2})
        assert len(first) == 2
        pid: list[int] = []

        def second() -> list[store.Claimed]:
            pid.append(backend_pid())
            return claim("b:2", max_in_flight={LIMITED: 2})

        future = in_thread(second)
        wait_for(lambda: pid and waits_on_lock_held_by(pid[0], holder))
        assert not future.done()
    assert future.result(10) == []
    assert Job.objects.filter(kind=LIMITED, status=Status.CLAIMED).count() == 2


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_that_meets_no_job_of_a_limited_kind_takes_no_lock() -> None:
    """Another claim holds the limited kind's lock; a claim whose candidates are all of
    other kinds (here: another queue) goes ahead without waiting for it."""
    for _ in range(3):
        tasks.limited.enqueue(0)
        tasks.noop.using(queue="other").enqueue()
    with transaction.atomic():
        assert len(claim("a:1", max_in_flight={LIMITED: 2}, queues=["default"])) == 2
        elsewhere = in_thread(
            lambda: claim("b:2", max_in_flight={LIMITED: 2}, queues=["other"])
        ).result(10)
        assert [c.kind for c in elsewhere] == [tasks.noop.kind] * 3


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_claim_takes_the_locks_of_all_its_limited_kinds_at_once_in_one_order() -> None:
    """A claim that meets a job of one limited kind holds every limited kind's lock of
    that claim: claims never hold one lock while waiting for another (no deadlock)."""
    tasks.limited.enqueue(0)
    tasks.noop.using(queue="other").enqueue()
    both = {LIMITED: 2, tasks.noop.kind: 2}
    holder = backend_pid()
    with transaction.atomic():
        assert [c.kind for c in claim("a:1", max_in_flight=both, queues=["default"])] == [LIMITED]
        pid: list[int] = []

        def other_kind() -> list[store.Claimed]:
            pid.append(backend_pid())
            return claim("b:2", max_in_flight=both, queues=["other"])

        future = in_thread(other_kind)
        wait_for(lambda: pid and waits_on_lock_held_by(pid[0], holder))
    assert [c.kind for c in future.result(10)] == [tasks.noop.kind]


@pytest.mark.django_db(transaction=True)
def test_a_worker_honours_the_tasks_own_max_in_flight() -> None:
    for _ in range(4):
        tasks.one_at_a_time.enqueue(0.1)
    with override_settings(JOBQUEUE=SETTINGS):
        assert run_burst(concurrency=4) == 4
    spans = sorted(
        (e.started_at, e.finished_at) for e in Execution.objects.filter(kind="tests.one_at_a_time")
    )
    assert len(spans) == 4
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end is not None
        assert start >= end


@pytest.mark.django_db(transaction=True)
def test_a_running_worker_follows_a_limit_changed_at_run_time(
    worker_thread: Callable[..., WorkerThread],
) -> None:
    w = worker_thread(concurrency=2)
    wait_for(lambda: w.worker._limits.ready)
    assert w.worker.max_in_flight.get(LIMITED) is None
    set_limit(LIMITED, max_in_flight=3)
    wait_for(lambda: w.worker.max_in_flight.get(LIMITED) == 3, timeout=10)
    clear_limit(LIMITED)
    wait_for(lambda: LIMITED not in w.worker.max_in_flight, timeout=10)


# --- manage.py jobqueue limit --------------------------------------------------------------


def jobqueue_limit(*args: str) -> str:
    out = StringIO()
    call_command("jobqueue", "limit", *args, stdout=out)
    return out.getvalue()


def test_the_limit_command_sets_shows_lists_and_clears() -> None:
    out = jobqueue_limit(LIMITED, "--max-in-flight", "2", "--rate-limit", "100/s")
    assert "MAX IN FLIGHT" in out
    [row] = [line for line in out.splitlines() if line.startswith(LIMITED)]
    assert row.split() == [LIMITED, "2", "database", "0", "100/s", "database", "-"]
    assert KindLimit.objects.get(kind=LIMITED).changed_by.startswith("manage.py jobqueue (")
    listed = jobqueue_limit()
    for kind in (LIMITED, RATED, "tests.one_at_a_time"):
        assert kind in listed
    out = jobqueue_limit(RATED, "--rate-limit", "none")
    [row] = [line for line in out.splitlines() if line.startswith(RATED)]
    assert row.split() == [RATED, "-", "-", "0", "-", "database", "-"]
    assert "run-time limits cleared" in jobqueue_limit(LIMITED, "--clear")
    assert "none were set" in jobqueue_limit(LIMITED, "--clear")
    assert not KindLimit.objects.filter(kind=LIMITED).exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([LIMITED, "--max-in-flight", "0"], "expected a whole number of at least 1, or none"),
        ([LIMITED, "--max-in-flight", "-2"], "got '-2'"),
        ([LIMITED, "--rate-limit", "abc/s"], "must be a rate such as"),
        (["no.such", "--max-in-flight", "2"], "no task is registered under kind 'no.such'"),
        (["--max-in-flight", "2"], "name the KIND"),
        ([LIMITED, "--clear", "--max-in-flight", "2"], "give --clear alone"),
    ],
)
def test_the_limit_command_refuses_bad_input(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        jobqueue_limit(*args)
    assert not KindLimit.objects.exists()
