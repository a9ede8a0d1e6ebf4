"""No pickle, no code loaded by a name read from the database, and secrets hidden when
jobs are shown (never altered where they are stored)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from django_jobqueue.conf import validate
from django_jobqueue.errors import ConfigurationError
from django_jobqueue.redaction import MARK, redact

PACKAGE = Path(__file__).resolve().parents[2] / "django_jobqueue"

# What would let stored data choose code to run or objects to build. importlib.metadata
# (the installed version, __version__) reads package metadata and imports nothing.
FORBIDDEN = re.compile(
    r"\b(pickle|cPickle|marshal|shelve|import_module|__import__|eval|exec|yaml\.load)\b\s*[(.]"
    r"|^\s*import\s+(pickle|marshal|shelve)\b"
    r"|^\s*from\s+(pickle|marshal|shelve|importlib(?!\.metadata\b))\b",
    re.MULTILINE,
)


# The one place that imports by name, and why it reads no name from data: the package's
# PEP 562 loader imports a module of its own fixed table (``_LAZY``), for a public name.
ALLOWED = {
    "django_jobqueue/__init__.py: from importlib",
    "django_jobqueue/__init__.py: import_module(",
    # contrib.celery: the same PEP 562 loader over its own fixed table; and the modules a
    # project names in its code (config_from_object("django.conf:settings"), include=,
    # autodiscover_tasks(packages)), never a name read from the database.
    "django_jobqueue/contrib/celery/__init__.py: from importlib",
    "django_jobqueue/contrib/celery/__init__.py: import_module(",
    "django_jobqueue/contrib/celery/app.py: import_module(",
    "django_jobqueue/contrib/celery/config.py: import_module(",
}


def test_the_package_never_unpickles_or_imports_a_name_it_reads() -> None:
    sources = list(PACKAGE.rglob("*.py"))
    assert len(sources) > 20
    found = [
        f"{path.relative_to(PACKAGE.parent)}: {match.group(0).strip()}"
        for path in sources
        for match in FORBIDDEN.finditer(path.read_text(encoding="utf-8"))
    ]
    assert [f for f in found if f not in ALLOWED] == []


def test_the_forbidden_pattern_does_catch_what_it_is_for() -> None:
    for text in [
        "import pickle",
        "pickle.loads(x)",
        "importlib.import_module(name)",
        "eval(s)",
        "from importlib import import_module",
    ]:
        assert FORBIDDEN.search(text), text
    assert not FORBIDDEN.search("from importlib.metadata import version")


def test_redaction_hides_secret_named_fields_wherever_they_are_nested() -> None:
    value = {
        "user": "ann",
        "Password": "hunter2",
        "nested": [{"api_token": "t", "ok": 1}, "plain"],
        "headers": {"Authorization": "Bearer x", "accept": "json"},
        "client_secret": {"deep": "x"},
    }
    shown = redact(value, ["password", "token", "secret", "authorization"])
    assert shown == {
        "user": "ann",
        "Password": MARK,
        "nested": [{"api_token": MARK, "ok": 1}, "plain"],
        "headers": {"Authorization": MARK, "accept": "json"},
        "client_secret": MARK,
    }
    assert value["Password"] == "hunter2"  # the original is untouched
    assert redact(value, []) is value
    assert redact("password", ["password"]) == "password"  # only keys name secrets


def test_redact_setting_defaults_and_bad_values() -> None:
    assert validate({}).redact == (
        "password",
        "passwd",
        "pwd",
        "token",
        "secret",
        "authorization",
        "api_key",
        "apikey",
        "credential",
        "private_key",
        "cookie",
        "session",
    )
    assert validate({"REDACT": ["pin"]}).redact == ("pin",)
    for bad in ["password", [""], [3]]:
        with pytest.raises(ConfigurationError, match="REDACT"):
            validate({"REDACT": bad})
