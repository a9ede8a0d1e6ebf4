"""Fuzzing what users and tasks hand us. Each generated input either round-trips
exactly or ends in a ``django_jobqueue`` error (at enqueue, nothing written) or in a
clean state whose journal note names the problem (after a run); never a database
error, a crashed worker or a half-written row. So do the ``jobqueue`` command's
arguments: a result or a ``CommandError``, nothing else."""

from __future__ import annotations

import contextlib
import io
import math
import os
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_jobqueue import JobQueueError, Status, validation
from django_jobqueue.models import Job
from tests.helpers import journal_of, run_burst
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )


# Every character, surrogates and NUL included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=30) | st.sampled_from(
    ["\x00", "a\x00b", "\ud800", "x\udfffy", "😀", "", "\\u0000", "{", "x" * 300]
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
    | st.sampled_from([b"bytes", {1, 2}, object(), timedelta(1), math.nan])
    # beyond Python's int-to-text limit, so not JSON-serialisable (built late: no repr)
    | st.just(5000).map(lambda digits: 10**digits)
)
keys = any_text | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=25,
)  # deep nesting has its own tests in test_bad_output.py


def same(stored: Any, given: Any) -> bool:
    """``stored`` is ``given`` read back. PostgreSQL's jsonb keeps numbers as decimals, so
    a float written in exponent form (1e16 and up) comes back as the int of the same
    value: equal as a number, not as a type."""
    if isinstance(given, float) and isinstance(stored, int) and not isinstance(stored, bool):
        return float(stored) == given
    if isinstance(given, dict):
        return (
            isinstance(stored, dict)
            and stored.keys() == given.keys()
            and all(same(stored[k], v) for k, v in given.items())
        )
    if isinstance(given, list | tuple):
        return (
            isinstance(stored, list)
            and len(stored) == len(given)
            and all(same(a, b) for a, b in zip(stored, given, strict=True))
        )
    return bool(type(stored) is type(given) and stored == given)


def storable(value: Any) -> bool:
    return validation.json_problem(value) is None


options = st.fixed_dictionaries(
    {},
    optional={
        "priority": st.integers(-3, 5) | st.sampled_from([True, "high", 1.0, None]),
        "delay": st.floats(allow_nan=True, allow_infinity=True)
        | st.integers(-(10**20), 10**20)
        | st.sampled_from([timedelta(-1), timedelta(days=10**6), "5"]),
        "queue": any_text | st.none(),
        "idempotency_key": any_text | st.none(),
    },
)


@fuzz(150)
@given(value=values, opts=options)
def test_enqueue_round_trips_or_refuses_with_our_error_writing_nothing(
    value: Any, opts: dict[str, Any]
) -> None:
    before = Job.objects.count()
    try:
        handle = tasks.record.using(**opts).enqueue(n=value)
    except JobQueueError:
        assert Job.objects.count() == before
        return
    assert storable(value)
    row = Job.objects.get(id=handle.id)
    if handle.disposition == "inserted":
        assert same(row.payload, {"n": value})
        assert row.status == Status.PENDING


WHERE = ["return", "carry", "attach", "raise", "pause"]


@pytest.mark.django_db(transaction=True)
@fuzz(40)
@given(value=values, where=st.sampled_from(WHERE))
def test_a_run_hands_back_anything_and_its_job_ends_cleanly(value: Any, where: str) -> None:
    key = uuid.uuid4().hex
    tasks.OUTPUTS[key] = (where, value)
    handle = tasks.echo.enqueue(key=key)
    run_burst(concurrency=1, max_jobs=1)

    job = handle.refresh()
    [entry] = journal_of(job.id)
    if where in ("raise", "pause"):
        # any message is stored: cleaned, bounded, never refused
        assert job.status == (Status.PENDING if where == "pause" else Status.DEAD)
        return
    if not storable(value) or (where == "carry" and not storable({"value": value})):
        assert job.status == Status.DEAD
        assert "cannot be stored" in entry.note or "not JSON-serialisable" in entry.note
        assert job.result is None
        return
    assert job.status == (Status.PENDING if where == "carry" else Status.COMPLETED), entry.note
    if where == "return":
        assert same(job.result, value)
    elif where == "carry":
        assert same(job.carry, {"value": value})
    else:
        assert same(entry.attachment, value)


# The classes of command-line values that crashed the commands (issue 17): numbers
# beyond every database's integers, durations beyond any date, bytes that are not UTF-8
# (they arrive as lone surrogates), empty strings; and negative and non-finite numbers.
huge_numbers = st.integers(2**31, 10**30).map(str) | st.sampled_from(
    ["1e300", "-1e300", "9" * 4400, "99999999999999999999/s"]
)
long_durations = st.builds(
    lambda n, unit: f"{n}{unit}", st.integers(36501, 10**20), st.sampled_from("wdhms")
) | st.sampled_from(["1e12", "99999999999d", "1" + "0" * 5000 + "d", "9999-12-31T23:59-12:00"])
invalid_utf8 = st.binary(min_size=1, max_size=6).map(lambda b: os.fsdecode(b"\xff" + b))
odd_numbers = st.sampled_from(["", " ", "-1", "-0", "0", "nan", "inf", "-inf", "1e-300", "0x10"])
hostile = huge_numbers | long_durations | invalid_utf8 | odd_numbers

words = st.sampled_from(
    [
        "stats",
        "health",
        "limit",
        "pause",
        "resume",
        "--max-heartbeat-age",
        "--max-pending-age",
        "--max-in-flight",
        "--rate-limit",
        "--clear",
        "--created-before",
        "--finished-after",
        tasks.record.kind,
        "list",
        "show",
        "cancel",
        "requeue",
        "cleanup",
        "--json",
        "--window",
        "--kind",
        "--queue",
        "--status",
        "--created-after",
        "--finished-before",
        "--limit",
        "--after",
        "--newest-first",
        "--force",
        "--older-than",
        "--dry-run",
        "7d",
        "0",
        "-1",
        "dead",
        str(uuid.UUID(int=0)),
        "2026-01-01T00:00",
        "2026-01-01T00:00:00|x",
    ]
)
argument = words | hostile | any_text.filter(lambda t: t not in ("-h", "--help"))
# a subcommand, then options each with a value: the shapes that reach the database
shaped = st.tuples(
    st.sampled_from(
        ["list", "cleanup", "show", "cancel", "requeue", "stats", "health", "pause", "resume"]
    ),
    st.lists(st.tuples(words, argument), max_size=3),
).map(lambda t: [t[0], *(part for pair in t[1] for part in pair)])
# the limit subcommand takes a kind first
limited = st.tuples(
    st.sampled_from([tasks.record.kind]) | hostile,
    st.sampled_from(["--max-in-flight", "--rate-limit", "--clear"]),
    hostile | st.sampled_from(["5", "none", "10/s"]),
).map(lambda t: ["limit", t[0], *(t[1:] if t[1] != "--clear" else t[1:2])])


@fuzz(250)
@given(args=st.lists(argument, max_size=6) | shaped | limited)
def test_jobqueue_command_arguments_give_a_result_or_a_command_error(args: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.suppress(CommandError):
        call_command("jobqueue", *args, stdout=out, stderr=err)


RUNWORKER_OPTIONS = [
    "--queue",
    "--kind",
    "--concurrency",
    "--cap",
    "--max-jobs",
    "--shutdown-timeout",
    "--poll-interval",
]
runworker_value = (
    hostile
    | any_text.filter(lambda t: not t.startswith("-"))
    | st.sampled_from(["1", "2", "0.5", "default", tasks.record.kind])
    | hostile.map(lambda v: f"{tasks.record.kind}={v}")  # --cap KIND=N
)


@pytest.mark.django_db(transaction=True)
@fuzz(60)
@given(options=st.lists(st.tuples(st.sampled_from(RUNWORKER_OPTIONS), runworker_value), max_size=3))
def test_runworker_arguments_run_a_burst_or_give_a_command_error(
    options: list[tuple[str, str]],
) -> None:
    """Every option of ``runworker`` with the values above: a burst run on an empty
    queue, or a ``CommandError`` (a usage error, when argparse refuses it)."""
    args = [f"{option}={value}" for option, value in options]
    with contextlib.suppress(CommandError):
        call_command("runworker", "--burst", *args, stdout=io.StringIO(), stderr=io.StringIO())
