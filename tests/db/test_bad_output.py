"""Nothing a task hands back can break its settlement: NUL bytes, lone surrogates, values
that are not JSON, text that cannot be printed, enormous messages, outputs over the
limit. Each job ends in a terminal state whose journal note names the problem, and the
same worker goes on to complete the next job. Enqueue refuses such payloads before any
SQL, leaving the caller's transaction usable. A settlement the database still refuses
is settled as a failure; a run past its timeout is given up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings

from django_jobqueue import InvalidOption, InvalidPayload, Status, enqueue, job
from django_jobqueue.models import Job
from django_jobqueue.rules.lifecycle import LATEST, NOTE_LIMIT
from django_jobqueue.worker import loop, sizing
from tests.helpers import is_postgres, journal_of, run_burst, wait_for
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

# how -> (the job's status, words its last journal note must contain)
EXPECTED = {
    "returns a NUL": (Status.DEAD, "the return value cannot be stored: the return value "),
    "returns a lone surrogate": (Status.DEAD, "['k'] contains a lone surrogate"),
    "returns a key with a NUL": (Status.DEAD, "has a key that contains a NUL character"),
    "returns what is not JSON": (Status.DEAD, "the return value is not JSON-serialisable (set)"),
    "returns NaN": (Status.DEAD, "Out of range float values are not JSON compliant"),
    "returns JSON nested too deeply": (Status.DEAD, "is nested more than"),
    "carries a NUL": (Status.DEAD, "ctx.carry cannot be stored: ctx.carry['x'] contains a NUL"),
    "carries what is not a dict": (Status.DEAD, "ctx.carry must be a dict, not int"),
    "attaches a lone surrogate": (Status.DEAD, "the ctx.attach() value cannot be stored"),
    "raises a NUL": (Status.DEAD, "ValueError: bad\\x00message\\ud800"),
    "raises what cannot be printed": (
        Status.DEAD,
        "Unprintable: <str() of the exception raised RuntimeError>",
    ),
    "raises a huge message": (Status.DEAD, "more characters cut"),
    "raises a class named with a NUL": (Status.DEAD, "Bad\\x00Name"),
    "pauses with a NUL note": (Status.PENDING, "p\\x00\\ud800"),
    "pauses with a note that is not text": (Status.PENDING, "[1, 2]"),
    "permanent with a NUL reason": (Status.DEAD, "r\\x00"),
    "returns too much": (Status.DEAD, "5,002 bytes of JSON, over MAX_OUTPUT_BYTES (4,000)"),
}


@pytest.fixture
def small_outputs() -> Iterator[None]:
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_OUTPUT_BYTES": 4000}):
        yield


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("small_outputs")
def test_every_bad_output_ends_its_job_with_a_note_naming_it_and_the_worker_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The one slot's claim buffer holds the other jobs; on a loaded machine a run (the
    # huge message's) took 9-12 s, past HOLD, and the buffered jobs were handed back
    # after they counted towards max_jobs, so the burst ended with them pending. The
    # hand-back has tests of its own (tests/concurrency/test_claim_buffer.py).
    monkeypatch.setattr(loop, "HOLD", 3600.0)
    assert set(EXPECTED) == set(tasks.MISBEHAVIOURS)
    bad = {how: tasks.misbehave.enqueue(how=how) for how in EXPECTED}
    good = tasks.add.enqueue(2, 3)

    run_burst(concurrency=1, worker_id="w:1", max_jobs=len(bad) + 1)

    for how, handle in bad.items():
        status, words = EXPECTED[how]
        h = handle.refresh()
        [entry] = journal_of(h.id)
        assert h.status == status, how
        assert words in entry.note, (how, entry.note[:300])
        assert len(entry.note) <= NOTE_LIMIT + 100, how
        assert h.result is None, how
    assert good.refresh().status == Status.COMPLETED
    assert good.result == 5
    assert {e.worker for h in bad.values() for e in journal_of(h.id)} == {"w:1"}
    assert journal_of(good.id)[0].worker == "w:1"


@pytest.mark.django_db(transaction=True)
def test_bad_output_keeps_the_stored_carry_and_drops_only_what_cannot_be_stored() -> None:
    handle = tasks.misbehave.enqueue(how="attaches a lone surrogate")
    run_burst(concurrency=1)
    [entry] = journal_of(handle.id)
    assert entry.attachment is None
    assert handle.refresh().carry == {}


@pytest.mark.django_db(transaction=True)
def test_a_pause_beyond_any_date_waits_until_the_latest_time_instead_of_crashing() -> None:
    handle = tasks.pause_later.enqueue(seconds=8e13)  # about 2.5 million years
    run_burst(concurrency=1, max_jobs=1)
    row = Job.objects.get(id=handle.id)
    assert row.status == Status.PENDING
    assert row.visible_at == LATEST


def test_a_delay_beyond_any_date_waits_until_the_latest_time_instead_of_overflowing() -> None:
    # found by the enqueue fuzz test: now + delay overflowed datetime
    handle = tasks.add.using(delay=timedelta(days=999_999_999)).enqueue(1, 2)
    assert Job.objects.get(id=handle.id).visible_at == LATEST


# --- enqueue refuses before any SQL -------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: tasks.record.enqueue(n={"a": ["ok", "no\x00"]}),
            "argument 'n' cannot be stored: n['a'][1] contains a NUL character",
        ),
        (
            lambda: tasks.record.enqueue(n={"k\ud800": 1}),
            "argument 'n' cannot be stored: n has a key that contains a lone surrogate",
        ),
        (
            lambda: tasks.add.enqueue(1, "\udc00"),
            "argument 'b' cannot be stored: b contains a lone",
        ),
        (
            lambda: tasks.record.enqueue(n=tasks._nested(200_000)),
            "argument 'n' cannot be stored: n[0][0][0][0]…[0][0] is nested more than",
        ),
    ],
)
def test_a_payload_the_database_would_refuse_is_an_invalid_payload_naming_the_path(
    call: object, message: str
) -> None:
    with transaction.atomic():
        before = tasks.add.enqueue(1, 1)
        with pytest.raises(InvalidPayload) as info:
            call()  # type: ignore[operator]
        # the caller's transaction is still usable: it goes on and commits
        after = tasks.add.enqueue(2, 2)
    assert message in str(info.value)
    assert Job.objects.filter(id__in=[before.id, after.id]).count() == 2
    assert Job.objects.count() == 2


@pytest.mark.parametrize(
    "option",
    [{"idempotency_key": "k\x00"}, {"queue": "q\ud800"}],
)
def test_keys_and_queue_names_the_database_would_refuse_are_invalid_options(
    option: dict[str, str],
) -> None:
    with pytest.raises(InvalidOption, match="contains a"):
        tasks.add.using(**option).enqueue(1, 2)
    assert Job.objects.count() == 0


def test_a_payload_over_max_payload_bytes_is_refused_naming_the_limit() -> None:
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "MAX_PAYLOAD_BYTES": 100}):
        tasks.record.enqueue(n="x" * 50)
        with pytest.raises(InvalidPayload, match=r"over MAX_PAYLOAD_BYTES \(100\)"):
            tasks.record.enqueue(n="x" * 200)
        with pytest.raises(InvalidPayload, match=r"item 1: .* over MAX_PAYLOAD_BYTES"):
            tasks.record.enqueue_many([{"n": 1}, {"n": "x" * 200}])
    assert Job.objects.count() == 1


def test_enqueue_of_a_kind_name_with_a_bad_payload_writes_nothing() -> None:
    with pytest.raises(InvalidPayload):
        enqueue("tests.taskapp.tasks.add", 1, "\x00")
    assert Job.objects.count() == 0


# --- a settlement the database refuses, and a run past its timeout ------------------------


@pytest.fixture
def refusing_trigger() -> Iterator[None]:
    """A real trigger that makes the database refuse the completion of tests.refused jobs."""
    when = "NEW.kind = 'tests.refused' AND NEW.status = 'completed'"
    if is_postgres():
        create = [
            "CREATE FUNCTION refuse_completion() RETURNS trigger AS $$ BEGIN"
            " RAISE EXCEPTION 'completion refused by a test trigger'; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_completion BEFORE UPDATE ON django_jobqueue_job"
            f" FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION refuse_completion()",
        ]
        drop = [
            "DROP TRIGGER refuse_completion ON django_jobqueue_job",
            "DROP FUNCTION refuse_completion()",
        ]
    elif connection.vendor == "mysql":
        create = [
            "CREATE TRIGGER refuse_completion BEFORE UPDATE ON django_jobqueue_job"
            f" FOR EACH ROW BEGIN IF {when} THEN SIGNAL SQLSTATE '45000'"
            " SET MESSAGE_TEXT = 'completion refused by a test trigger'; END IF; END"
        ]
        drop = ["DROP TRIGGER refuse_completion"]
    else:
        create = [
            "CREATE TRIGGER refuse_completion BEFORE UPDATE ON django_jobqueue_job"
            f" WHEN {when} BEGIN"
            " SELECT RAISE(ABORT, 'completion refused by a test trigger'); END"
        ]
        drop = ["DROP TRIGGER refuse_completion"]
    with connection.cursor() as cursor:
        for statement in create:
            cursor.execute(statement)
    yield
    with connection.cursor() as cursor:
        for statement in drop:
            cursor.execute(statement)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("refusing_trigger")
def test_a_settlement_the_database_refuses_is_settled_as_a_failure_and_the_worker_goes_on() -> None:
    refused = tasks.refused.enqueue()
    others = [tasks.add.enqueue(n, n) for n in range(3)]

    run_burst(concurrency=4, max_jobs=4)

    [entry] = journal_of(refused.id)
    assert refused.refresh().status == Status.DEAD
    assert entry.outcome == "dead"
    assert "the database refused this run's settlement (completed)" in entry.note
    assert "completion refused by a test trigger" in entry.note
    assert [h.refresh().status for h in others] == [Status.COMPLETED] * 3


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "stubborn"])
def test_a_run_past_its_timeout_is_retried_then_dead_and_concurrency_stays_honest(
    worker_thread: object, cooperative: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The claim buffer's ceiling as low as the slots, so that the bound below says
    # something: an abandoned run's slot must not let the worker claim past it.
    monkeypatch.setattr(sizing, "CAP", 2)
    overrun = tasks.overrun.enqueue(seconds=3, cooperative=cooperative)
    quick = [tasks.add.enqueue(n, n) for n in range(20)]
    w = worker_thread(concurrency=2)  # type: ignore[operator]
    most_claimed = 0

    def settled() -> bool:
        nonlocal most_claimed
        most_claimed = max(most_claimed, Job.objects.filter(status=Status.CLAIMED).count())
        return Job.objects.filter(status__in=[Status.DEAD, Status.COMPLETED]).count() == 21

    wait_for(settled, timeout=20, interval=0.02)

    entries = journal_of(overrun.id)
    assert [(e.outcome, "timed out after 0:00:00.500000" in e.note) for e in entries] == [
        ("retried", True),
        ("dead", True),
    ]
    assert overrun.refresh().status == Status.DEAD
    assert all(h.refresh().status == Status.COMPLETED for h in quick)
    # Never more claimed than the slots plus the claim buffer's ceiling.
    assert most_claimed <= 2 + sizing.cap(2) == 4
    if cooperative:
        # a run that heeds ctx.cancelled returns, and its abandoned thread exits: the
        # worker is back to exactly its concurrency of slot threads
        wait_for(lambda: len(_slot_threads()) == 2, timeout=10)
    else:
        assert len(_slot_threads()) >= 2 + 1  # the stubborn run's thread is still alive
    w.stop()  # type: ignore[attr-defined]
    assert job(overrun.id).failure_count == 2


def _slot_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("jobqueue-slot-")]
