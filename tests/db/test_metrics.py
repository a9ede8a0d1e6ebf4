"""The metrics view: counters, histogram and gauges after a burst of real worker runs,
read through the view as Prometheus would; and who may read it."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import django_jobqueue
from django_jobqueue.models import JournalEntry
from django_jobqueue.store import DURATION_BUCKETS
from tests.concurrency.procs import REPO_ROOT as ROOT
from tests.concurrency.procs import database_url
from tests.helpers import run_burst
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite]

TOKEN = "s3cret-token-for-the-tests-0123"
URL = "/metrics/"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: Client, **headers: Any) -> Samples:
    response = client.get(URL, **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def staff_client(*, may_view_jobs: bool = True) -> Client:
    """A logged-in staff user's client; with ``django_jobqueue.view_job`` unless told not."""
    name = "ops" if may_view_jobs else "ops-no-perm"
    user, _ = User.objects.get_or_create(username=name, defaults={"is_staff": True})
    if may_view_jobs:
        user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
def test_counters_and_durations_after_a_burst_of_two_worker_processes() -> None:
    add_kind, fails_kind, permanent_kind = (
        tasks.add.kind,
        tasks.always_fails.kind,
        tasks.permanent.kind,
    )
    tasks.add.enqueue_many([{"a": n, "b": n} for n in range(30)])
    tasks.always_fails.enqueue_many([{}] * 4)  # max_failures=3: retried, retried, dead
    tasks.permanent.enqueue_many([{"reason": "bad"}] * 2)
    tasks.add.using(delay=timedelta(hours=1)).enqueue(0, 0)  # scheduled, not run
    # Two workers at once: a runworker process runs the failing kinds while a worker in
    # this process runs the rest. The view, served here, counts both from the database.
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "django",
            "runworker",
            "--burst",
            "--concurrency",
            "2",
            "--kind",
            fails_kind,
            "--kind",
            permanent_kind,
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(ROOT),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    mine = run_burst(concurrency=2, kinds=[add_kind])
    _, log = child.communicate(timeout=60)
    assert child.returncode == 0, log
    assert mine == 30
    workers = set(JournalEntry.objects.values_list("worker", flat=True))
    assert len(workers) == 2  # two worker processes' runs

    samples = scrape(staff_client())
    runs = "jobqueue_runs_total"
    assert value(samples, runs, kind=add_kind, outcome="completed") == 30
    assert value(samples, runs, kind=fails_kind, outcome="retried") == 8
    assert value(samples, runs, kind=fails_kind, outcome="dead") == 4
    assert value(samples, runs, kind=permanent_kind, outcome="dead") == 2
    assert not any(name == runs and ("kind", "tests.never") in labels for name, labels in samples)

    hist = "jobqueue_run_duration_seconds"
    assert value(samples, f"{hist}_count", kind=add_kind) == 30
    assert value(samples, f"{hist}_count", kind=fails_kind) == 12
    assert value(samples, f"{hist}_bucket", kind=fails_kind, le="+Inf") == 12
    assert value(samples, f"{hist}_sum", kind=add_kind) > 0
    buckets = [value(samples, f"{hist}_bucket", kind=add_kind, le=str(b)) for b in DURATION_BUCKETS]
    assert buckets == sorted(buckets)  # cumulative
    assert buckets[-1] == 30  # every no-op ran in under an hour

    assert value(samples, "jobqueue_scheduled_jobs") == 1
    assert value(samples, "jobqueue_pending_jobs", kind=add_kind, queue="default") == 0
    assert value(samples, "jobqueue_dead_jobs", kind=fails_kind) == 4
    assert value(samples, "jobqueue_dead_jobs", kind=permanent_kind) == 2
    assert value(samples, "jobqueue_claimed_jobs", kind=add_kind) == 0
    assert value(samples, "jobqueue_workers", state="gone") == 2  # both burst workers stopped
    assert value(samples, "jobqueue_workers", state="alive") == 0

    # A cleanup deletes the journal of the jobs it deletes, never a run from the counters:
    # the runs and the histogram read exactly as before it.
    assert django_jobqueue.cleanup(finished_before=timezone.now() + timedelta(seconds=1)) == 36
    assert not JournalEntry.objects.exists()
    after = scrape(staff_client())
    counted = {k: v for k, v in samples.items() if k[0].startswith((runs, hist))}
    assert {k: v for k, v in after.items() if k[0].startswith((runs, hist))} == counted


@pytest.mark.django_db
def test_backlog_gauges_show_runnable_jobs_by_kind_and_queue_and_their_age() -> None:
    old = timezone.now() - timedelta(minutes=10)
    tasks.add.using(queue="mail", run_at=old).enqueue(1, 1)
    tasks.add.enqueue(1, 2)
    django_jobqueue.pause_queue("mail")
    samples = scrape(staff_client())
    add_kind = tasks.add.kind
    assert value(samples, "jobqueue_pending_jobs", kind=add_kind, queue="mail") == 1
    assert value(samples, "jobqueue_pending_jobs", kind=add_kind, queue="default") == 1
    assert value(samples, "jobqueue_pending_jobs", kind=tasks.noop.kind, queue="default") == 0
    assert value(samples, "jobqueue_oldest_pending_seconds", kind=add_kind) >= 600
    assert value(samples, "jobqueue_queue_paused", queue="mail") == 1


@pytest.mark.django_db
@override_settings(JOBQUEUE={"METRICS_TOKEN": TOKEN})
def test_who_may_read_the_metrics() -> None:
    anonymous = Client().get(URL)
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"].startswith("Bearer")

    user = User.objects.create_user("someone", password="pw")
    client = Client()
    client.force_login(user)
    assert client.get(URL).status_code == 403

    scrape(staff_client())
    samples = scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ("jobqueue_scheduled_jobs", ()) in samples

    wrong = Client().get(URL, HTTP_AUTHORIZATION="Bearer not-the-token-at-all-000")
    assert wrong.status_code == 401
    assert b"invalid bearer token" in wrong.content
    basic = Client().get(URL, HTTP_AUTHORIZATION="Basic b3BzOnB3")
    assert basic.status_code == 401
    # A wrong token is refused even beside a staff session.
    assert staff_client().get(URL, HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    assert staff_client().post(URL).status_code == 405


@pytest.mark.django_db
@override_settings(JOBQUEUE={"METRICS_TOKEN": TOKEN})
def test_a_staff_session_needs_the_view_job_permission_and_the_token_still_works() -> None:
    """A staff user the admin refuses everywhere (no permission at all) reads no
    numbers; with ``view_job`` (or as a superuser) the metrics are served; the bearer
    token needs no session."""
    refused = staff_client(may_view_jobs=False).get(URL)
    assert refused.status_code == 403
    assert b"django_jobqueue.view_job" in refused.content
    inactive = User.objects.create_user("gone", is_staff=True, is_active=False)
    inactive.user_permissions.add(Permission.objects.get(codename="view_job"))
    client = Client()
    client.force_login(inactive)
    assert client.get(URL).status_code in (401, 403)

    assert ("jobqueue_scheduled_jobs", ()) in scrape(staff_client())
    root = Client()
    root.force_login(User.objects.create_superuser("root", password="pw"))
    assert ("jobqueue_scheduled_jobs", ()) in scrape(root)
    assert ("jobqueue_scheduled_jobs", ()) in scrape(Client(), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


@pytest.mark.django_db
def test_a_bearer_token_is_refused_when_no_token_is_configured() -> None:
    response = Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 401
    assert b"METRICS_TOKEN" in response.content


@pytest.mark.django_db
def test_openmetrics_is_served_when_asked_for() -> None:
    response = staff_client().get(URL, HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.rstrip().endswith(b"# EOF")


def test_the_module_says_what_to_install_without_prometheus_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "django_jobqueue.metrics")
    with pytest.raises(ImproperlyConfigured, match=r"pip install 'django-jobqueue\[metrics\]'"):
        importlib.import_module("django_jobqueue.metrics")
