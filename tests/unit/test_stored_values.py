"""The pure parts of "nothing stored can break a reader": the MAX_JSON_DEPTH setting,
the depth walk, decoding stored text, and the one rule for times (clamped)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from django_jobqueue import ConfigurationError, conf, validation
from django_jobqueue.admin.common import pretty_json
from django_jobqueue.rules.lifecycle import EARLIEST, LATEST, clamped, later
from django_jobqueue.validation import READ_DEPTH, Undecodable, decode, dumps, too_deep


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_max_json_depth_defaults_to_100() -> None:
    assert conf.validate({}).max_json_depth == 100
    assert conf.validate({"MAX_JSON_DEPTH": READ_DEPTH}).max_json_depth == READ_DEPTH


@pytest.mark.parametrize("value", [0, -1, True, "100", 2.5, READ_DEPTH + 1])
def test_a_bad_max_json_depth_names_the_key(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="MAX_JSON_DEPTH must") as info:
        conf.validate({"MAX_JSON_DEPTH": value})
    assert info.value.key == "MAX_JSON_DEPTH"  # type: ignore[attr-defined]


def test_too_deep_names_the_path_to_the_first_list_or_object_past_the_limit() -> None:
    value = {"a": [1, {"b": [[2]]}], "c": 3}
    assert too_deep(value, 5) is None
    assert too_deep(value, 4) == ["['a']", "[1]", "['b']", "[0]"]
    assert too_deep(3, 0) is None  # a scalar is not nested at all
    assert too_deep(nested(100_000), 100) == ["[0]"] * 100  # no recursion however deep


def test_dumps_refuses_a_value_deeper_than_max_depth_naming_the_path_and_the_limit() -> None:
    assert dumps(nested(5), max_depth=5) == "[[[[[]]]]]"
    with pytest.raises(validation.Unstorable) as info:
        dumps({"x": nested(6)}, max_depth=5, own_level=True)
    assert info.value.path == "['x'][0][0][0][0][0]"
    assert "nested more than 5 levels deep (MAX_JSON_DEPTH)" in str(info.value)
    with pytest.raises(validation.Unstorable, match="more than 3 levels deep"):
        dumps(nested(200_000), max_depth=3)  # past what json.dumps itself can encode


@pytest.mark.parametrize(
    ("text", "why"),
    [
        # Past the json module's own recursion limit (on Python 3.11; 3.12+ decodes it,
        # then the depth check refuses it): either way, too deep, said so.
        ("[" * 5000 + "]" * 5000, "nested (too deeply to decode|more than 200 levels deep)"),
        ("[" * 300 + "]" * 300, f"nested more than {READ_DEPTH} levels deep"),
        ('{"a": ', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_stored_text_that_cannot_be_decoded_reads_as_undecodable_saying_why(
    text: str | bytes, why: str
) -> None:
    value = decode(text)
    assert isinstance(value, Undecodable)
    assert re.search(why, value.error), value.error
    assert pretty_json(value) == f"(undecodable: {value.error})"


def test_stored_text_within_the_read_depth_decodes() -> None:
    text = "[" * READ_DEPTH + "]" * READ_DEPTH
    assert decode(text) == nested(READ_DEPTH)
    assert decode('{"a": [1, "[[[["]}') == {"a": [1, "[[[["]}


NEW_YORK, TOKYO = ZoneInfo("America/New_York"), ZoneInfo("Asia/Tokyo")


@pytest.mark.parametrize(
    ("moment", "expected"),
    [
        (datetime.max.replace(tzinfo=NEW_YORK), LATEST),  # year 10000 in UTC
        (datetime.max.replace(tzinfo=UTC), LATEST),
        (datetime.min.replace(tzinfo=TOKYO), EARLIEST),  # year 0 in UTC
        (datetime.min.replace(tzinfo=timezone(timedelta(hours=14))), EARLIEST),
        (datetime.min.replace(tzinfo=UTC), EARLIEST),
        (datetime(2030, 5, 1, 9, tzinfo=TOKYO), datetime(2030, 5, 1, 0, tzinfo=UTC)),
    ],
)
def test_every_time_is_clamped_to_the_range_that_reads_back_everywhere(
    moment: datetime, expected: datetime
) -> None:
    result = clamped(moment)
    assert result == expected
    assert result.tzinfo is UTC
    for zone in ("Pacific/Kiritimati", "Pacific/Honolulu"):  # either end shown locally
        result.astimezone(ZoneInfo(zone))


def test_a_delay_is_clamped_by_the_same_rule() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert later(now, timedelta.max) == LATEST
    assert later(now, timedelta(days=1)) == datetime(2030, 1, 2, tzinfo=UTC)


def test_a_periodic_schedule_with_arguments_nested_too_deeply_is_a_configuration_error() -> None:
    entry = {"kind": "a.b", "cron": "* * * * *", "kwargs": {"tree": nested(101)}}
    with pytest.raises(ConfigurationError, match=r"PERIODIC\[0\].*kwargs\['tree'\].*100 levels"):
        conf.validate({"PERIODIC": [entry]})
    assert conf.validate({"PERIODIC": [{**entry, "kwargs": {"tree": nested(100)}}]}).periodic
