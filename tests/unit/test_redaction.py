"""Redaction of what the default words and a Django task's signature say is secret
(issue 17): the new default words, names with other separators, and a Django task's
positional arguments, known or not to this process."""

from __future__ import annotations

from typing import Any

import pytest

from django_jobqueue.redaction import MARK, redact, redact_payload, redact_text


def a_django_payload(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """A payload as the Django Tasks backend stores it."""
    return {"args": list(args), "kwargs": kwargs, "priority": 0, "backend": "default"}


class Login:
    """A registry entry as the backend's DjangoTaskDef answers for
    ``log_in(user, password, *api_keys)``."""

    def positional_names(self, count: int) -> list[str | None]:
        return (["user", "password"] + ["api_keys"] * max(0, count - 2))[:count]


@pytest.mark.parametrize(
    "name",
    [
        "X-Api-Key",
        "apiKey",
        "db_passwd",
        "AWS_CREDENTIALS",
        "privateKey",
        "Set-Cookie",
        "sessionid",
    ],
)
def test_default_words_match_across_case_and_separators(name: str) -> None:
    assert redact({name: "s3cr3t", "user": "ann"}) == {name: MARK, "user": "ann"}


def test_session_words_hide_session_counters_too_by_choice() -> None:
    # Substring matching, as for every word: a field named like a session (session_id,
    # session_key, sessionid) is hidden, and so is session_count. Hiding a counter costs
    # an operator a number; showing a session id would hand out a login.
    assert redact({"session_count": 3, "sessions": 2}) == {"session_count": MARK, "sessions": MARK}


def test_a_django_tasks_positional_secret_is_hidden_by_its_parameter_name() -> None:
    payload = a_django_payload("ann", "hunter2", "k1", "k2")
    shown = redact_payload(payload, task=Login())
    assert shown["args"] == ["ann", MARK, MARK, MARK]
    assert payload["args"] == ["ann", "hunter2", "k1", "k2"]  # the stored value untouched


def test_arguments_past_the_signature_and_unknown_django_kinds_are_hidden() -> None:
    class One:
        def positional_names(self, count: int) -> list[str | None]:
            return (["user"] + [None] * count)[:count]

    assert redact_payload(a_django_payload("ann", "x"), task=One())["args"] == ["ann", MARK]
    # this process never imported the task's module: which argument is secret is unknown
    assert redact_payload(a_django_payload("ann", "hunter2"), task=None)["args"] == [MARK, MARK]


def test_a_payload_of_our_own_tasks_is_redacted_by_key_only() -> None:
    payload = {"args": ["ann", "hunter2"], "password": "p"}  # a task taking args=, password=
    assert redact_payload(payload, task=None) == {"args": ["ann", "hunter2"], "password": MARK}


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("login failed: password=hunter2 user=ann", "login failed: password=******** user=ann"),
        ('{"api_key": "abc123", "n": 1}', '{"api_key": "********", "n": 1}'),
        ("X-Api-Key: zzz", "X-Api-Key: ********"),
        ("https://x.example/?token=abc&page=2", "https://x.example/?token=********&page=2"),
        ("session:abc token=t2", "session:******** token=********"),
        ("nothing secret: a=b, c: d", "nothing secret: a=b, c: d"),
        ("__password=hunter2 key=password=p2", "__password=******** key=password=********"),
        ("", ""),
    ],
)
def test_redact_text_hides_the_value_after_a_secret_named_key(text: str, shown: str) -> None:
    assert redact_text(text, words=("password", "token", "api_key", "session")) == shown


@pytest.mark.timeout(20)
def test_redact_text_reads_a_long_word_once() -> None:
    # A 200,000-character word (a blob in an exception's message) before a secret: a
    # scan from every position of the word would take hours; one scan, milliseconds.
    blob = "x" * 200_000
    assert redact_text(f"{blob} password=hunter2", words=("password",)) == f"{blob} password={MARK}"


def test_redact_text_with_no_words_leaves_text_alone() -> None:
    assert redact_text("token=abc", words=()) == "token=abc"
