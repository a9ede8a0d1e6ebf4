"""What a view-only operator can read: values under secret-named keys (``REDACT``) are
hidden on every page that shows a payload, carry, result or journal attachment; and no
page changes anything on a GET (the one request CSRF protection cannot guard)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.redaction import redact_text
from tests.security.pages import page_keys, pages
from tests.security.world import ROLES, World, fingerprint

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

VIEWER = next(r for r in ROLES if r.name == "view-only staff")
SUPERUSER = next(r for r in ROLES if r.superuser)
SECRETS = {"password": "hunter2-pw", "api_token": "tok-0123", "client_secret": "s3cr3t-cs"}
JOBS = "/admin/django_jobqueue/job/"
JOURNAL = "/admin/django_jobqueue/journalentry/"


def secret_entry(world: World) -> JournalEntry:
    """A dead job whose carry, result and journal attachment each hold the secrets."""
    job = world.hostile["dead"]
    Job.objects.filter(id=job.id).update(carry=dict(SECRETS), result={"login": dict(SECRETS)})
    return JournalEntry.objects.create(
        job=job, kind=job.kind, run_no=2, outcome="dead", attachment={"sent": dict(SECRETS)}
    )


def leaked(text: str) -> list[str]:
    return [value for value in SECRETS.values() if value in text]


def test_the_job_page_hides_secret_named_values(world: World) -> None:
    entry = secret_entry(world)
    text = world.client(VIEWER).get(f"{JOBS}{entry.job_id}/change/").content.decode()
    assert "password" in text  # the key is shown, its value is not
    assert leaked(text) == []


def test_the_journal_changelist_hides_secret_named_values(world: World) -> None:
    secret_entry(world)
    text = world.client(VIEWER).get(JOURNAL).content.decode()
    assert leaked(text) == []


def test_the_journal_entry_page_hides_secret_named_values(world: World) -> None:
    entry = secret_entry(world)
    response = world.client(VIEWER).get(f"{JOURNAL}{entry.pk}/change/")
    assert response.status_code == 200
    assert leaked(response.content.decode()) == []


def test_jobqueue_show_hides_secrets_in_a_journal_note(world: World) -> None:
    # An exception's message is text: the value after a secret-named key is hidden.
    job = world.hostile["dead"]
    JournalEntry.objects.create(
        job=job, kind=job.kind, run_no=3, outcome="dead", note="ValueError: password=hunter2-pw"
    )
    out = io.StringIO()
    call_command("jobqueue", "show", str(job.id), stdout=out)
    assert "password=" in out.getvalue()
    assert leaked(out.getvalue()) == []


@pytest.mark.parametrize("key", page_keys())
def test_no_page_changes_anything_on_a_get(world: World, key: str) -> None:
    page = {p.key: p for p in pages(world)}[key]
    before = fingerprint()
    assert world.client(SUPERUSER).get(page.url).status_code in (page.shown, 403)
    assert fingerprint() == before


def secret_failure(world: World) -> JournalEntry:
    """A dead job whose last failure's note holds the secrets: in its first line (the
    jobs list's error cell and its hover text), in the task's own frame and in a library
    frame the job page folds."""
    import django

    job = world.hostile["dead"]
    Job.objects.filter(id=job.id).update(failure_count=1)
    library = django.__file__.rsplit("/", 1)[0] + "/db/utils.py"
    note = (
        f"ConnectionError: login refused password={SECRETS['password']}\n"
        "Traceback (most recent call last):\n"
        f'  File "{library}", line 9, in connect\n'
        f"    connect(api_token={SECRETS['api_token']!r})\n"
        '  File "/srv/shop/tasks.py", line 3, in sync\n'
        f'    login(client_secret="{SECRETS["client_secret"]}")\n'
        f"ConnectionError: login refused password={SECRETS['password']}"
    )
    return JournalEntry.objects.create(job=job, kind=job.kind, run_no=3, outcome="dead", note=note)


def page_text(world: World, entry: JournalEntry, where: str) -> str:
    """The viewer's page ``where`` that shows ``entry``'s note (its job's error)."""
    url = {
        "jobs list": f"{JOBS}?status__exact=dead",
        "job page": f"{JOBS}{entry.job_id}/change/",
        "journal list": JOURNAL,
        "journal entry": f"{JOURNAL}{entry.pk}/change/",
    }[where]
    response = world.client(VIEWER).get(url)
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("where", ["jobs list", "job page", "journal list", "journal entry"])
def test_the_last_error_and_its_folded_traceback_hide_secret_named_values(
    world: World, where: str
) -> None:
    entry = secret_failure(world)
    text = page_text(world, entry, where)
    assert "login refused password=********" in text  # the error is shown, its secret not
    assert leaked(text) == []


# Secrets as they turn up in exception messages, and what must be shown of each: the
# credential after an Authorization scheme, a quoted value to its closing quote, a
# URL's password, a PEM block's body, ``pwd`` and URL-encoded pairs. The last rows are
# ordinary text that must come out unchanged: redaction must not eat useful words.
TABLE = [
    ("Authorization: Bearer abc.def.ghi", "Authorization: Bearer ********"),
    ("authorization: bearer abc.def.ghi", "authorization: bearer ********"),
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ********"),
    ("Authorization: Token 9944b09199c62bcf9418ad846dd0", "Authorization: Token ********"),
    (
        'Authorization: Digest username="bob", realm="api", response="6629fae4"',
        "Authorization: Digest ********",
    ),
    ('{"Authorization": "Bearer abc.def.ghi"}', '{"Authorization": "********"}'),
    (
        "sent header Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig to api",
        "sent header Bearer ******** to api",
    ),
    ("Basic dXNlcjpwYXNzd29yZA== rejected", "Basic ******** rejected"),
    ("password='hunter 2'", "password='********'"),
    ('password="hunter 2" user=bob', 'password="********" user=bob'),
    ("password=hunter2", "password=********"),
    ("PASSWORD: hunter2", "PASSWORD: ********"),
    ("pwd=hunter2", "pwd=********"),
    ("PWD: hunter2; user=bob", "PWD: ********; user=bob"),
    ("passwd=s3cret&user=bob", "passwd=********&user=bob"),
    ("api_key%3Dabc123%26page%3D2", "api_key%3D********%26page%3D2"),
    ("GET /v1?user=bob&api_key%3Dabc123", "GET /v1?user=bob&api_key%3D********"),
    ("?token=abc123&next=/home", "?token=********&next=/home"),
    ("postgres://bob:PgPass123@db/prod", "postgres://bob:********@db/prod"),
    ("redis://:r3dispass@cache:6379/0", "redis://:********@cache:6379/0"),
    ("amqp://guest:gu3st@rabbit:5672//", "amqp://guest:********@rabbit:5672//"),
    (
        "could not connect to mysql://root:toor@127.0.0.1:3306/app (refused)",
        "could not connect to mysql://root:********@127.0.0.1:3306/app (refused)",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nok",
        "-----BEGIN RSA PRIVATE KEY-----********-----END RSA PRIVATE KEY-----\nok",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk",
        "-----BEGIN OPENSSH PRIVATE KEY-----********",
    ),
    ('"client_secret": "s3cr3t cs"', '"client_secret": "********"'),
    ("X-Api-Key: abc123", "X-Api-Key: ********"),
    ("session=abcd1234; path=/", "session=********; path=/"),
    ("failed: password=abc", "failed: password=********"),
    # ordinary text, unchanged
    ("password reset e-mail sent", "password reset e-mail sent"),
    ("https://example.com:8080/path?q=1", "https://example.com:8080/path?q=1"),
    ("https://bob@example.com/", "https://bob@example.com/"),
    ("Token validation failed", "Token validation failed"),
    ("Basic auth is disabled", "Basic auth is disabled"),
    ("Bearer token missing", "Bearer token missing"),
    ("user=bob count=3", "user=bob count=3"),
    (
        "invalid literal for int() with base 10: 'abc'",
        "invalid literal for int() with base 10: 'abc'",
    ),
    ("the secret ingredient is love", "the secret ingredient is love"),
    ("ratio 3:4 at 10:45", "ratio 3:4 at 10:45"),
]


@pytest.mark.parametrize(("raw", "shown"), TABLE, ids=[raw[:40] for raw, _ in TABLE])
def test_redaction_of_a_stored_note_as_jobqueue_show_prints_it(
    world: World, raw: str, shown: str
) -> None:
    # Through the database: the note is stored as raised and read back by ``show``,
    # which prints its first line; redact_text itself gives the whole text exactly.
    job = world.hostile["dead"]
    entry = JournalEntry.objects.create(job=job, kind=job.kind, run_no=9, outcome="dead", note=raw)
    assert redact_text(JournalEntry.objects.get(pk=entry.pk).note) == shown
    out = io.StringIO()
    call_command("jobqueue", "show", str(job.id), stdout=out)
    assert shown.splitlines()[0] in out.getvalue()


@pytest.mark.parametrize("where", ["jobs list", "job page", "journal list", "journal entry"])
def test_the_admin_hides_a_whole_credential_in_the_error_and_its_traceback(
    world: World, where: str
) -> None:
    # The admin's error column, folded traceback and journal go through the same
    # redact_text: a bearer token, a URL's password and a quoted value, each whole.
    job = world.hostile["dead"]
    Job.objects.filter(id=job.id).update(failure_count=1)
    note = (
        "PermissionError: Authorization: Bearer abc.def.ghi9 refused\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/shop/tasks.py", line 3, in sync\n'
        "    connect('postgres://bob:PgPass123@db/prod', password='hunter 2')\n"
        "PermissionError: Authorization: Bearer abc.def.ghi9 refused"
    )
    entry = JournalEntry.objects.create(job=job, kind=job.kind, run_no=4, outcome="dead", note=note)
    text = page_text(world, entry, where)
    assert "Authorization: Bearer ********" in text
    assert [s for s in ("abc.def.ghi9", "PgPass123", "hunter 2") if s in text] == []
