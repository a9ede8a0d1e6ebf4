"""JOBQUEUE["METRICS_TOKEN"]: None or a long enough printable secret; bad values name the key."""

from __future__ import annotations

from typing import Any

import pytest

from django_jobqueue import ConfigurationError, conf


def test_the_metrics_token_defaults_to_none_and_keeps_a_good_value() -> None:
    assert conf.validate({}).metrics_token is None
    token = "0123456789abcdef-+/="
    assert conf.validate({"METRICS_TOKEN": token}).metrics_token == token


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (12345678901234567890, "must be a string or None, not int"),
        (b"0123456789abcdef", "must be a string or None, not bytes"),
        ("short", "at least 16 printable ASCII characters without spaces (got 5 characters)"),
        ("0123456789 abcdef", "without spaces"),
        ("0123456789abcdef\n", "without spaces"),
        ("0123456789abcdéf", "printable ASCII"),
        ("", "(got 0 characters)"),
    ],
)
def test_a_bad_metrics_token_is_refused_naming_the_key(raw: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        conf.validate({"METRICS_TOKEN": raw})
    message = str(info.value)
    assert message.startswith("METRICS_TOKEN must")
    assert problem in message
    assert info.value.key == "METRICS_TOKEN"
