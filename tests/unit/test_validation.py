"""The one home of coercion and validation, and the callers that name their key or option."""

from __future__ import annotations

import math
from argparse import ArgumentTypeError
from datetime import timedelta
from functools import partial

import pytest

from django_jobqueue import Backoff, InvalidOption, Pause, task, validation
from django_jobqueue.conf import validate
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.management.arguments import positive_int, positive_seconds, seconds

Error = partial(InvalidOption, option="x")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, timedelta(seconds=5)),
        (0.5, timedelta(milliseconds=500)),
        (timedelta(0), timedelta(0)),
        ("5m", timedelta(minutes=5)),  # as the command line takes it
        ("1h30m", timedelta(minutes=90)),
        (" 2W ", timedelta(weeks=2)),
    ],
)
def test_duration_takes_seconds_a_timedelta_or_the_command_lines_text(
    value: object, expected: timedelta
) -> None:
    assert validation.duration(value, name="x", error=Error) == expected


@pytest.mark.parametrize(
    ("value", "allow_zero", "message"),
    [
        (
            "5",
            True,
            "x must be a number of seconds, a timedelta or a duration such as '45s', '5m', "
            "'12h', '7d' or '1h30m', got '5'",
        ),
        (
            "5 minutes",
            True,
            "x must be a number of seconds, a timedelta or a duration such as '45s', '5m', "
            "'12h', '7d' or '1h30m', got '5 minutes'",
        ),
        ("9" * 400 + "w", True, "x must be a finite number of seconds, got inf"),
        (
            True,
            True,
            "x must be a number of seconds, a timedelta or a duration such as '5m', not bool",
        ),
        (-1, True, "x must not be negative, got -1"),
        (0, False, "x must be positive, got 0"),
        (-1, False, "x must be positive, got -1"),
        (math.nan, True, "x must be a finite number of seconds, got nan"),
        (math.inf, True, "x must be a finite number of seconds, got inf"),
    ],
)
def test_duration_refuses_with_the_name(value: object, allow_zero: bool, message: str) -> None:
    with pytest.raises(InvalidOption) as raised:
        validation.duration(value, name="x", error=Error, allow_zero=allow_zero)
    assert str(raised.value) == message
    assert raised.value.option == "x"


@pytest.mark.parametrize("value", [0, -3, True, 1.5, "2"])
def test_positive_int_refuses_everything_but_whole_numbers_from_one(value: object) -> None:
    with pytest.raises(InvalidOption, match="n must be a positive integer, got"):
        validation.positive_int(value, name="n", error=Error)


def test_positive_int_takes_none_only_when_allowed() -> None:
    assert validation.positive_int(None, name="n", error=Error, allow_none=True) is None
    assert validation.positive_int(3, name="n", error=Error) == 3
    with pytest.raises(InvalidOption, match="positive integer, got None"):
        validation.positive_int(None, name="n", error=Error)


@pytest.mark.parametrize("value", ["", "x" * 11, 5])
def test_bounded_text_fits_its_column(value: object) -> None:
    with pytest.raises(InvalidOption, match="at most 10 characters"):
        validation.bounded_text(value, name="queue", error=Error, max_length=10)
    assert validation.bounded_text("q", name="queue", error=Error, max_length=10) == "q"


def test_json_is_encoded_one_way_and_its_problems_are_described() -> None:
    assert validation.dumps({"a": [1, 2.5, None]}) == '{"a":[1,2.5,null]}'
    assert validation.json_problem({"a": 1}) is None
    assert "not JSON serializable" in (validation.json_problem({1, 2}) or "")
    assert "not JSON compliant" in (validation.json_problem(math.nan) or "")


@pytest.mark.usefixtures("task_registry")
def test_each_caller_names_its_own_key_or_option() -> None:
    with pytest.raises(ConfigurationError, match="POLL_INTERVAL must be positive") as raised:
        validate({"POLL_INTERVAL": 0})
    assert raised.value.key == "POLL_INTERVAL"
    with pytest.raises(InvalidOption, match=r"tests\.v: lease must be positive"):
        task(kind="tests.v", lease=0)(lambda: None)
    with pytest.raises(InvalidOption, match=r"tests\.v: max_failures must be a positive integer"):
        task(kind="tests.v", max_failures=0)(lambda: None)
    with pytest.raises(ValueError, match="Pause resume_in must not be negative"):
        Pause(resume_in=-1)


@pytest.mark.usefixtures("task_registry")
def test_a_task_lease_may_be_given_in_seconds() -> None:
    defn = task(kind="tests.v.seconds", lease=90)(lambda: None)
    assert defn.lease == timedelta(seconds=90)


def test_command_line_arguments_use_the_same_rules() -> None:
    assert positive_int("3") == 3
    assert seconds("0") == 0.0
    assert positive_seconds("0.5") == 0.5
    for call, text, message in [
        (positive_int, "0", "must be a positive integer, got 0"),
        (positive_int, "x", "expected a whole number"),
        (seconds, "-1", "must not be negative"),
        (positive_seconds, "0", "must be positive"),
        (seconds, "inf", "must be a finite number of seconds"),
    ]:
        with pytest.raises(ArgumentTypeError, match=message):
            call(text)


@pytest.mark.usefixtures("task_registry")
def test_task_options_are_checked_with_the_kind_and_option_named() -> None:
    with pytest.raises(InvalidOption, match=r"Unknown task option\(s\): bogus\. Known:") as raised:
        task(bogus=1)
    assert raised.value.option == "bogus"
    with pytest.raises(InvalidOption, match="kind must be a non-empty string") as raised:
        task(kind="")(lambda: None)
    assert raised.value.option == "kind"
    with pytest.raises(InvalidOption, match="at most 200 characters"):
        task(kind="k" * 201)(lambda: None)
    with pytest.raises(InvalidOption, match="queue must be") as raised:
        task(kind="tests.v.queue", queue="")(lambda: None)
    assert (raised.value.kind, raised.value.option) == ("tests.v.queue", "queue")


def test_every_error_fact_reads_as_none_when_the_raiser_did_not_know_it() -> None:
    error = InvalidOption("bad")
    assert (error.kind, error.option, error.job_id, error.index, error.status) == (None,) * 5


def test_a_backoff_takes_seconds_and_refuses_a_cap_below_its_base() -> None:
    assert Backoff(base=2, cap=60) == Backoff(timedelta(seconds=2), timedelta(minutes=1))
    with pytest.raises(ValueError, match="Backoff base must not be negative"):
        Backoff(base=-1)
    with pytest.raises(ValueError, match=r"Backoff cap \(0:00:01\) must not be below its base"):
        Backoff(base=2, cap=1)


def test_first_refused_names_the_path_to_the_first_refused_part_or_key() -> None:
    value = {"a": [1, {"b": (2, {3})}], "c": object()}
    steps, part = validation.first_refused(value, validation.not_json) or ([], None)
    assert "".join(steps) == "['a'][1]['b'][1]"
    assert part == {3}
    assert validation.first_refused({"ok": [1, "x", None]}, validation.not_json) is None
    assert validation.first_refused(b"raw", validation.not_json) == ([], b"raw")
    deep: list[object] = [object()]
    for _ in range(5000):  # deeper than the recursion limit: walked with its own stack
        deep = [deep]
    found = validation.first_refused(deep, validation.not_json)
    assert found is not None
    assert len(found[0]) == 5001


_NAMES = ("id", "note", "n", "result", "carry")


def _rows(**values: object) -> list[list[object]]:
    """Two rows in the order of ``_NAMES``: the first ends before its open fields; the
    second has them, with ``values`` in place of its defaults."""
    second = {"id": "b", "note": "déjà vu", "n": 2.5, "result": None, "carry": None, **values}
    return [["a", "fine", 1], [second[name] for name in _NAMES]]


@pytest.mark.parametrize(
    "open_values",
    [{}, {"result": {"x": [1, {"y": None}]}}, {"carry": {"k": "😀"}}, {"result": [1, 2]}],
    ids=["flat", "nested result", "astral text", "list result"],
)
def test_dumps_rows_writes_what_dumps_writes(open_values: dict[str, object]) -> None:
    rows = _rows(**open_values)
    written = validation.dumps_rows(rows, names=_NAMES, open_fields=("result", "carry"))
    assert written == validation.dumps(rows)


@pytest.mark.parametrize(
    ("open_values", "path", "problem"),
    [
        ({"result": {"x": {1: "a"}}}, "[1]['result']['x']", "not a string"),
        ({"carry": {"k": ["a\x00b"]}}, "[1]['carry']['k'][0]", "NUL"),
        ({"result": "\ud800"}, "[1]['result']", "lone surrogate"),
        ({"note": "a\x00b"}, "[1]['note']", "NUL"),
    ],
    ids=["non-text key", "NUL in an open value", "lone surrogate", "NUL in a plain field"],
)
def test_dumps_rows_refuses_what_dumps_refuses_naming_where(
    open_values: dict[str, object], path: str, problem: str
) -> None:
    rows = _rows(**open_values)
    with pytest.raises(validation.Unstorable) as caught:
        validation.dumps_rows(rows, names=_NAMES, open_fields=("result", "carry"))
    assert caught.value.path == path
    assert problem in caught.value.problem


def test_dumps_rows_refuses_nan_as_dumps_does() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        validation.dumps_rows(_rows(result=math.nan), names=_NAMES, open_fields=("result",))
