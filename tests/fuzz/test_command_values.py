"""The command-line values that crashed ``runworker`` and ``jobqueue`` with a traceback
(issue 17, finding 8), each now a ``CommandError`` naming its option; and the empty
names that were taken as a filter matching nothing, now refused. Found by the fuzz
tests in ``test_fuzz.py``, which keep looking with the same classes of values."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from django_jobqueue.models import Job, QueuePause
from tests.concurrency.procs import REPO_ROOT, database_url
from tests.taskapp import tasks

# Each test rolls back; those marked transaction=True start a worker (it closes its
# connection when it stops), a thread, a process or a second session: they need commits.
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

HUGE = "99999999999999999999"  # beyond every database's integer columns
KIND = tasks.record.kind
BAD_UTF8 = os.fsdecode(b"\xff")  # how a command line that is not UTF-8 arrives: '\udcff'

# (what crashed on main, the command line, the option the error must name)
CRASHED = [
    ("OverflowError", ["jobqueue", "stats", "--window", "99999999999d"], "--window"),
    ("OverflowError", ["jobqueue", "list", "--created-after", "99999999999d"], "--created-after"),
    ("OverflowError", ["jobqueue", "list", "--created-before", "999999d"], "--created-before"),
    ("OverflowError", ["jobqueue", "list", "--finished-after", "999999d"], "--finished-after"),
    (
        "OverflowError",
        ["jobqueue", "list", "--finished-before", "99999999999d"],
        "--finished-before",
    ),
    ("DataError", ["jobqueue", "list", "--limit", HUGE], "--limit"),
    ("OverflowError", ["jobqueue", "cleanup", "--older-than", "99999999999d"], "--older-than"),
    (
        "OverflowError",
        ["jobqueue", "health", "--max-heartbeat-age", "1e300"],
        "--max-heartbeat-age",
    ),
    (
        "OverflowError",
        ["jobqueue", "health", "--max-pending-age", "99999999999d"],
        "--max-pending-age",
    ),
    ("DataError", ["jobqueue", "limit", KIND, "--max-in-flight", HUGE], "--max-in-flight"),
    ("UnicodeEncodeError", ["jobqueue", "limit", BAD_UTF8, "--clear"], "KIND"),
    ("DataError", ["runworker", "--burst", "--concurrency", HUGE], "--concurrency"),
    ("DataError", ["runworker", "--burst", "--queue", BAD_UTF8], "--queue"),
]

# Empty names that were a filter matching nothing: a worker that silently claims
# nothing, a list or a cleanup that silently finds nothing.
EMPTY = [
    (["runworker", "--burst", "--queue", ""], "--queue"),
    (["runworker", "--burst", "--kind", ""], "--kind"),
    (["jobqueue", "list", "--queue", ""], "--queue"),
    (["jobqueue", "list", "--kind", ""], "--kind"),
    (["jobqueue", "cleanup", "--older-than", "7d", "--kind", ""], "--kind"),
    (["jobqueue", "pause", ""], "QUEUE"),
]


def refused(args: list[str]) -> str:
    """The CommandError's message for this command line (it must raise one)."""
    command, *rest = args
    with pytest.raises(CommandError) as caught:
        call_command(command, *rest, stdout=io.StringIO(), stderr=io.StringIO())
    return str(caught.value)


@pytest.mark.parametrize(
    ("crashed_with", "args", "option"), CRASHED, ids=[" ".join(c[1])[:60] for c in CRASHED]
)
def test_a_value_that_crashed_a_command_is_a_command_error_naming_its_option(
    crashed_with: str, args: list[str], option: str
) -> None:
    tasks.record.enqueue(n=1)
    message = refused(args)
    assert f"argument {option}:" in message, (crashed_with, message)
    assert Job.objects.filter(status="pending").count() == 1  # nothing ran, nothing changed


@pytest.mark.parametrize(("args", "option"), EMPTY, ids=[" ".join(e[0]) for e in EMPTY])
def test_an_empty_name_is_refused_naming_its_option(args: list[str], option: str) -> None:
    tasks.record.enqueue(n=1)
    message = refused(args)
    assert f"argument {option}:" in message
    assert "cannot be empty" in message
    assert Job.objects.filter(status="pending").count() == 1
    assert not QueuePause.objects.exists()


@pytest.mark.parametrize(
    ("args", "option", "says"),
    [
        (["runworker", "--burst", "--concurrency", "100000"], "--concurrency", "at most 10000"),
        (["runworker", "--burst", "--max-jobs", HUGE], "--max-jobs", "at most 2147483647"),
        (["runworker", "--burst", "--cap", f"{KIND}={HUGE}"], "--cap", "at most 2147483647"),
        (["runworker", "--burst", "--cap", f"{BAD_UTF8}=1"], "--cap", "KIND contains a lone"),
        (["runworker", "--burst", "--poll-interval", "1e10"], "--poll-interval", "at most"),
        (["runworker", "--burst", "--shutdown-timeout", "nan"], "--shutdown-timeout", "finite"),
        (["runworker", "--burst", "--kind", "x" * 201], "--kind", "at most 200 characters"),
        (["jobqueue", "list", "--limit", "-1"], "--limit", "positive"),
        (["jobqueue", "list", "--after", BAD_UTF8], "--after", "lone surrogate"),
        (["jobqueue", "list", "--created-after", "9999-12-31T23:59-05:00"], "--created-after", ""),
        (["jobqueue", "stats", "--window", "1" + "0" * 5000 + "d"], "--window", "characters)"),
        (["jobqueue", "health", "--max-pending-age=-inf"], "--max-pending-age", "above zero"),
        (["jobqueue", "limit", KIND, "--rate-limit", f"{HUGE}/s"], "--rate-limit", "at most"),
        (["jobqueue", "resume", "q" * 101], "QUEUE", "at most 100 characters"),
    ],
)
def test_other_values_beyond_what_a_command_takes_are_refused_naming_the_option(
    args: list[str], option: str, says: str
) -> None:
    message = refused(args)
    assert f"argument {option}:" in message
    assert says in message


@pytest.mark.django_db(transaction=True)
def test_invalid_utf8_on_a_real_command_line_is_a_usage_error_not_a_traceback() -> None:
    """The bytes themselves, as a shell passes ``--queue $'\\xff'``: exit status 2 and
    one line naming the option, no traceback."""
    for args in ([b"runworker", b"--burst", b"--queue", b"\xff"], [b"jobqueue", b"pause", b"\xff"]):
        proc = subprocess.run(
            [os.fsencode(sys.executable), b"-m", b"django", *args],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "PYTHONPATH": str(REPO_ROOT),
                "DJANGO_SETTINGS_MODULE": "tests.settings",
                "DATABASE_URL": database_url(),
            },
            capture_output=True,
            timeout=60,
            check=False,
        )
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 2, stderr
        assert "Traceback" not in stderr
        assert "contains a lone surrogate" in stderr
