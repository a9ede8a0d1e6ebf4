"""Every job that is not running says why (issue 34, item 1): for each reason, a job put
in that state through the public API (real claims holding the limits, a real paused
queue, a real sleep, wait and retry run by the queue's own executor), then its reason
as ``handle.explain()`` gives it, as ``jobqueue why`` prints it, and as the admin's job
page says it with its link (and its action in place). The claim is asked too: a job
said to be held is not claimed, and the reason's fix (resume, run now) lets it run.

On SQLite and MariaDB as on PostgreSQL: every reason is about rows and claims every
database has."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from html import unescape
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import django_jobqueue
from django_jobqueue import Explanation, Status, Why, chain, pause_queue, set_limit, store
from django_jobqueue.models import Job
from django_jobqueue.task import limiting
from django_jobqueue.task.explain import Action, Target
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.db.test_command import manage
from tests.helpers import WorkerThread, manage_in_process, wait_for
from tests.taskapp import matrix_tasks as matrix
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

JOBS = "/admin/django_jobqueue/job/"
DASHBOARD = f"{JOBS}dashboard/"
SLOW = tasks.timed_sleep  # a kind no other test here limits
LIVE = "explain-worker"


# Where each target is changed in the admin.
LINKS = {
    Target.JOB: JOBS + "{ref}/change/",
    Target.WORKFLOW: "/admin/django_jobqueue/workflow/{ref}/change/",
    Target.QUEUE: DASHBOARD + "#queues",
    Target.LIMITS: DASHBOARD + "#limits",
    Target.WORKERS: DASHBOARD + "#workers",
}


@pytest.fixture(autouse=True)
def fresh_limits() -> Iterator[None]:
    limiting.forget()
    yield
    limiting.forget()


@pytest.fixture
def worker() -> str:
    """A live worker serving every kind in every queue (its heartbeat, as a worker
    registers it at its start)."""
    store.register_worker(
        worker_id=LIVE, host="test", pid=1, queues=[], kinds=registry.kinds(), concurrency=4
    )
    return LIVE


def claim(kind: str, worker: str = "holder") -> list[store.Claimed]:
    """One claim of ``kind`` with the limits a worker's claim enforces (read as its
    turn reads them)."""
    most, rules = limiting.claim_limits([kind], max_age=0)
    request = store.ClaimRequest(limit=1, kinds=[kind], max_in_flight=most, per_key=rules)
    return store.claim_jobs(worker_id=worker, request=request)


def why(job_id: object) -> str:
    out = StringIO()
    call_command("jobqueue", "why", str(job_id), stdout=out)
    return out.getvalue()


def page_line(client: Client, job_id: object) -> tuple[str, str, str]:
    """The job page's line of why: (code, message, link)."""
    text = client.get(f"{JOBS}{job_id}/change/").content.decode()
    found = re.search(
        r'<div class="jq-why" id="job-why" data-code="([^"]+)">.*?'
        r'<span id="job-why-message">(.*?)</span>.*?<a id="job-why-link" href="([^"]+)"',
        text,
        re.S,
    )
    assert found, text[:3000]
    return found[1], unescape(found[2]), unescape(found[3])


# An age in a reason ("(3s ago)", "(in 2h)"), which two readers a second apart say
# differently: the rest of the reason must be the same.
AGE = re.compile(r"\((?:in )?\d[^()]*\)")


def steady(text: str) -> str:
    return AGE.sub("(age)", text)


def explained(
    handle: django_jobqueue.JobHandle, code: Why, client: Client, *parts: str
) -> Explanation:
    """The job's reason, the same from the API, the command and the admin page, saying
    each of ``parts``."""
    reason = handle.explain()
    assert reason.code == code, reason
    for part in parts:
        assert part in reason.message, reason.message
    printed = why(handle.id)
    assert steady(printed.splitlines()[0]) == steady(f"{code}: {reason.message}")
    shown_code, shown, link = page_line(client, handle.id)
    assert (shown_code, steady(shown)) == (code, steady(reason.message))
    assert link == LINKS[reason.target].format(ref=reason.ref)
    return reason


# --- a queue paused ---------------------------------------------------------------------


def test_a_job_in_a_paused_queue_says_who_paused_it_and_resumes_it_in_place(
    worker: str, operator: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.add.using(queue="explain-paused").enqueue(1, 2)
    pause_queue("explain-paused", actor="olga@ops")
    client = client_for(operator)
    reason = explained(handle, Why.QUEUE_PAUSED, client, "'explain-paused'", "by olga@ops")
    assert (reason.target, reason.ref, reason.action) == (
        Target.QUEUE,
        "explain-paused",
        Action.RESUME_QUEUE,
    )
    assert "to lift it: manage.py jobqueue resume explain-paused" in why(handle.id)
    _, _, link = page_line(client, handle.id)
    assert link == f"{DASHBOARD}#queues"
    assert claim(tasks.add.kind) == []  # the claim agrees: nothing to take
    page = client.get(f"{JOBS}{handle.id}/change/").content.decode()
    assert 'id="job-why-action">Resume the queue</button>' in page
    # The button in place: the queue resumes, the operator is back on the job's page.
    back = client.post(
        f"{DASHBOARD}queue/",
        {"queue": "explain-paused", "do": "resume", "next": f"{JOBS}{handle.id}/change/"},
    )
    assert back.status_code == 302
    assert back["Location"] == f"{JOBS}{handle.id}/change/"
    assert store.paused_queues() == []
    assert handle.explain().code == Why.NEXT
    assert [c.id for c in claim(tasks.add.kind)] == [handle.id]


def test_the_resume_button_goes_back_only_to_a_page_of_this_site(
    operator: User, client_for: Callable[..., Client]
) -> None:
    pause_queue("explain-elsewhere")
    back = client_for(operator).post(
        f"{DASHBOARD}queue/",
        {"queue": "explain-elsewhere", "do": "resume", "next": "https://evil.example/"},
    )
    assert back["Location"] == DASHBOARD


def test_a_viewer_sees_the_reason_without_the_button(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.add.using(queue="explain-viewed").enqueue(1, 2)
    pause_queue("explain-viewed")
    page = client_for(viewer).get(f"{JOBS}{handle.id}/change/").content.decode()
    assert 'data-code="queue_paused"' in page
    assert "job-why-action" not in page


# --- the kind's global limit ------------------------------------------------------------


def test_a_job_whose_kind_is_at_max_in_flight_names_the_limit_and_its_holder(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    set_limit(SLOW.kind, max_in_flight=1)
    first, second = SLOW.enqueue(0.1), SLOW.enqueue(0.1)
    [held] = claim(SLOW.kind, worker="holder-1")
    assert held.id == first.id
    reason = explained(
        second,
        Why.KIND_AT_LIMIT,
        client_for(viewer),
        "max_in_flight=1 (set in database)",
        "1 running",
        f"job {first.id} on holder-1",
    )
    assert (reason.target, reason.ref, reason.action) == (
        Target.LIMITS,
        SLOW.kind,
        Action.RAISE_LIMIT,
    )
    assert f"manage.py jobqueue limit {SLOW.kind} --max-in-flight N" in why(second.id)
    _, _, link = page_line(client_for(viewer), second.id)
    assert link == f"{DASHBOARD}#limits"
    assert claim(SLOW.kind) == []  # the claim agrees
    set_limit(SLOW.kind, max_in_flight=2)  # raised: the job is next
    assert second.explain().code == Why.NEXT
    assert [c.id for c in claim(SLOW.kind)] == [second.id]


# --- the key's limits -------------------------------------------------------------------


def test_a_job_whose_key_is_at_its_limit_says_n_of_m_and_the_oldest_holder(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    set_limit(SLOW.kind, max_in_flight_per_key=1)
    first = SLOW.using(key="acme").enqueue(0.1)
    second = SLOW.using(key="acme").enqueue(0.1)
    other = SLOW.using(key="globex").enqueue(0.1)
    [held] = claim(SLOW.kind, worker="holder-2")
    assert held.id == first.id
    explained(
        second,
        Why.KEY_AT_LIMIT,
        client_for(viewer),
        "key 'acme' at its limit: 1 of 1 running",
        "max_in_flight_per_key, set in database",
        f"oldest holder: job {first.id} on holder-2",
    )
    assert "--max-in-flight-per-key N" in why(second.id)
    assert other.explain().code == Why.NEXT  # another key has room
    assert [c.id for c in claim(SLOW.kind)] == [other.id]  # the claim agrees


def test_an_ordered_job_behind_its_keys_head_names_the_head(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    set_limit(SLOW.kind, ordered=True)
    head = SLOW.using(key="k1", delay=timedelta(hours=1)).enqueue(0.1)
    behind = SLOW.using(key="k1").enqueue(0.1)
    reason = explained(
        behind,
        Why.BEHIND_KEY_HEAD,
        client_for(viewer),
        f"head, job {head.id} (pending, due ",
        "one at a time, in enqueue order",
    )
    assert (reason.target, reason.ref) == (Target.JOB, str(head.id))
    _, _, link = page_line(client_for(viewer), behind.id)
    assert link == f"{JOBS}{head.id}/change/"
    assert claim(SLOW.kind) == []  # the claim agrees: the head is not due, so none runs


def test_an_ordered_keys_running_head_holds_the_next_as_a_limit_of_one(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    set_limit(SLOW.kind, ordered=True)
    first = SLOW.using(key="k2").enqueue(0.1)
    second = SLOW.using(key="k2").enqueue(0.1)
    assert [c.id for c in claim(SLOW.kind, worker="holder-3")] == [first.id]
    explained(second, Why.KEY_AT_LIMIT, client_for(viewer), "1 of 1 running (ordered")
    assert claim(SLOW.kind) == []


def test_a_fair_keys_job_waits_for_the_keys_running_fewer(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    set_limit(SLOW.kind, fair=True)
    SLOW.using(key="busy").enqueue(0.1)
    later = SLOW.using(key="busy").enqueue(0.1)
    assert len(claim(SLOW.kind, worker="holder-4")) == 1
    idle = SLOW.using(key="idle").enqueue(0.1)
    explained(
        later,
        Why.FAIR_SHARE,
        client_for(viewer),
        "key 'busy' runs 1; 1 other key running fewer go first",
        "none finished",
    )
    assert [c.id for c in claim(SLOW.kind)] == [idle.id]  # the claim agrees


# --- a workflow's parents ---------------------------------------------------------------


def test_a_step_waiting_on_its_parents_names_them_and_their_states(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    flow = chain(tasks.add.s(1, 2), tasks.add.s(3, 4), name="explain-chain").enqueue()
    child = Job.objects.get(workflow_id=flow.id, step_name="1")
    reason = explained(
        django_jobqueue.job(child.id),
        Why.WAITING_ON_PARENTS,
        client_for(viewer),
        "1 of 1 not yet completed: 0 (pending)",
    )
    assert (reason.target, reason.ref) == (Target.WORKFLOW, str(flow.id))
    _, _, link = page_line(client_for(viewer), child.id)
    assert link == f"/admin/django_jobqueue/workflow/{flow.id}/change/"


# --- parked: a durable sleep, an event wait ---------------------------------------------


def test_a_sleeping_job_says_until_when_and_runs_now_in_place(
    worker: str, operator: User, client_for: Callable[..., Client]
) -> None:
    handle = matrix.subject.enqueue("sleep")
    run_jobs(kinds=[matrix.subject])
    client = client_for(operator)
    reason = explained(handle, Why.SLEEPING, client, "sleeping (ctx.sleep) until ", "(in 59m")
    assert reason.action == Action.RUN_NOW
    page = client.get(f"{JOBS}{handle.id}/change/").content.decode()
    assert 'id="job-why-action">Run now</button>' in page
    done = client.post(f"{JOBS}{handle.id}/act/run_now/", {"post": "yes"})
    assert done.status_code == 302
    assert handle.explain().code == Why.NEXT


def test_a_job_waiting_for_an_event_names_it_its_key_and_its_timeout(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = matrix.subject.enqueue("wait")
    run_jobs(kinds=[matrix.subject])
    reason = explained(
        handle,
        Why.WAITING_FOR_EVENT,
        client_for(viewer),
        f"waiting for event {matrix.EVENT!r} key {str(handle.id)!r} (ctx.wait_for), until ",
    )
    assert reason.action == Action.NONE


# --- scheduled: a retry, run_at, a debounce ---------------------------------------------


def test_a_retry_after_an_error_says_which_retry_and_the_error(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = matrix.subject.enqueue("fail")
    run_jobs(kinds=[matrix.subject])
    reason = explained(
        handle,
        Why.SCHEDULED,
        client_for(viewer),
        "scheduled for ",
        ": retry 1 after RuntimeError: the matrix's planned failure",
    )
    assert reason.action == Action.RUN_NOW
    assert "to lift it: django_jobqueue.run_now(" in why(handle.id)


def test_a_job_enqueued_for_later_says_its_time_was_set_at_enqueue(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.add.using(run_at=timezone.now() + timedelta(days=2)).enqueue(1, 2)
    explained(handle, Why.SCHEDULED, client_for(viewer), "(in 1d 23h", "set at enqueue (run_at")


def test_a_debounced_job_says_its_window(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    debounced = tasks.add.using(dedup_key="explain-d", debounce=timedelta(minutes=5))
    handle = debounced.enqueue(1, 2)
    assert debounced.enqueue(1, 2).id == handle.id  # merged, its run pushed back
    explained(handle, Why.SCHEDULED, client_for(viewer), "debounce window: a merge ")


# --- no live worker, and the place in line ----------------------------------------------


def test_a_job_no_live_worker_serves_says_so_and_links_to_the_workers(
    viewer: User, client_for: Callable[..., Client]
) -> None:
    handle = tasks.add.enqueue(1, 2)
    reason = explained(
        handle, Why.NO_WORKER, client_for(viewer), "no live worker runs kind", "'default'"
    )
    assert reason.target == Target.WORKERS
    _, _, link = page_line(client_for(viewer), handle.id)
    assert link == f"{DASHBOARD}#workers"
    # A worker for another queue does not serve it; one for its queue does.
    store.register_worker(
        worker_id="other-queue",
        host="t",
        pid=2,
        queues=["q9"],
        kinds=[tasks.add.kind],
        concurrency=1,
    )
    assert handle.explain().code == Why.NO_WORKER
    store.register_worker(
        worker_id="its-queue",
        host="t",
        pid=3,
        queues=["default"],
        kinds=[tasks.add.kind],
        concurrency=1,
    )
    assert handle.explain().code == Why.NEXT


def test_a_pending_job_counts_the_runnable_jobs_ahead_of_it_in_claim_order(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    tasks.high.enqueue()
    tasks.high.enqueue()
    tasks.add.enqueue(1, 1)
    tasks.low.enqueue()  # the same priority, enqueued before it
    mine = tasks.low.enqueue()
    tasks.low.enqueue()  # after it: not ahead
    tasks.high.using(queue="elsewhere").enqueue()  # another queue: not ahead of it
    explained(
        mine,
        Why.BEHIND_OTHERS,
        client_for(viewer),
        "behind 4 claimable jobs in queue 'default' (3 of higher priority)",
    )


def test_running_and_finished_jobs_say_so(worker: str) -> None:
    handle = tasks.always_fails.enqueue()
    run_jobs(kinds=[tasks.always_fails], now=timezone.now() + timedelta(days=1))
    reason = handle.explain()
    assert reason.code == Why.FINISHED
    assert not reason.blocking
    assert reason.message == "dead after 3 failures: ValueError: this always fails"
    assert reason.action == Action.REQUEUE
    running = tasks.add.enqueue(1, 2)
    claim(tasks.add.kind, worker="runner")
    assert running.explain().code == Why.RUNNING
    assert "on runner, lease until" in running.explain().message
    django_jobqueue.cancel(running.id, actor="olga")
    assert running.explain().message.endswith("; asked to stop by olga")


# --- the jobs list and jobqueue show -----------------------------------------------------


def test_the_jobs_list_shows_each_rows_reason_on_hover_of_its_badge(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    paused = tasks.add.using(queue="explain-listed").enqueue(1, 2)
    pause_queue("explain-listed", actor="ops")
    later = tasks.add.using(delay=timedelta(hours=3)).enqueue(1, 2)
    text = client_for(viewer).get(JOBS).content.decode()
    hovers = [unescape(h) for h in re.findall(r'<span class="jq-why" title="([^"]*)">', text)]
    assert len(hovers) == 2
    assert f"queue_paused: {steady(paused.explain().message)}" in map(steady, hovers)
    assert any(h.startswith("scheduled: scheduled for ") for h in hovers), hovers
    assert later.explain().message.startswith(hovers[0].removeprefix("scheduled: ")) or any(
        later.explain().message.startswith(h.removeprefix("scheduled: ")) for h in hovers
    )


def test_jobqueue_show_says_why_in_one_line(worker: str) -> None:
    handle = tasks.add.using(queue="explain-shown").enqueue(1, 2)
    pause_queue("explain-shown", actor="ops")
    out = StringIO()
    call_command("jobqueue", "show", str(handle.id), stdout=out)
    [line] = [x for x in out.getvalue().splitlines() if x.startswith("why:")]
    assert steady(line) == steady(f"why:              {handle.explain().message}")


def test_jobqueue_why_exits_1_for_an_unknown_job_and_2_for_a_bad_id() -> None:
    missing = "01900000-0000-7000-8000-000000000000"
    with pytest.raises(CommandError, match=f"No job with id {missing}"):
        why(missing)
    ran = manage_in_process("jobqueue", "why", missing)
    assert ran.returncode == 1
    assert f"No job with id {missing}" in ran.stderr
    ran = manage_in_process("jobqueue", "why", "not-an-id")
    assert ran.returncode == 2
    assert "usage:" in ran.stderr
    assert "not-an-id" in ran.stderr


@pytest.mark.django_db(transaction=True)
def test_jobqueue_why_in_a_real_process(worker: str) -> None:
    handle = tasks.add.using(queue="explain-child").enqueue(1, 2)
    pause_queue("explain-child", actor="ops")
    ran = manage("why", str(handle.id))
    assert ran.returncode == 0, ran.stderr
    code_and_message, place, lift = ran.stdout.splitlines()
    # The process said it at its own moment: an age may be a second apart from ours.
    assert steady(code_and_message) == steady(f"queue_paused: {handle.explain().message}")
    assert place == "change at: queue explain-child (manage.py jobqueue stats)"
    assert lift == "to lift it: manage.py jobqueue resume explain-child"


def test_the_lists_reasons_cost_no_query_per_row(
    worker: str, viewer: User, client_for: Callable[..., Client]
) -> None:
    """The hover reads what rows share once a page (the paused queues, the workers, the
    limits and a limited kind's claims): as many queries for nine rows as for five."""
    set_limit(SLOW.kind, max_in_flight=1)
    pause_queue("explain-costs")

    def four() -> None:
        tasks.add.using(queue="explain-costs").enqueue(1, 2)
        tasks.add.using(delay=timedelta(hours=1)).enqueue(1, 2)
        tasks.add.enqueue(1, 2)
        SLOW.enqueue(0.1)

    four()
    claim(SLOW.kind)  # its first job holds the limit: the next says so
    SLOW.enqueue(0.1)
    client = client_for(viewer)
    with CaptureQueriesContext(connections["default"]) as fewer:
        assert client.get(JOBS).status_code == 200
    four()
    with CaptureQueriesContext(connections["default"]) as more:
        text = client.get(JOBS).content.decode()
    assert text.count('<span class="jq-why" title="') == 9
    assert "kind_at_limit: " in text
    assert len(more.captured_queries) == len(fewer.captured_queries)


@pytest.mark.django_db(transaction=True)
def test_a_running_workers_claim_holds_the_limit_and_the_reason_names_that_worker(
    worker_thread: Callable[..., WorkerThread], viewer: User, client_for: Callable[..., Client]
) -> None:
    """A real worker (its own heartbeat, its own claims) runs the first job of a kind
    limited to one; the second says the limit is held by that job on that worker, and
    runs once the first is done."""
    set_limit(SLOW.kind, max_in_flight=1)
    first, second = SLOW.enqueue(4.0), SLOW.enqueue(0.1)
    running = worker_thread(worker_id="explain-real", concurrency=4, kinds=[SLOW.kind])
    wait_for(lambda: first.refresh().status == Status.CLAIMED, timeout=30)
    explained(
        second,
        Why.KIND_AT_LIMIT,
        client_for(viewer),
        "max_in_flight=1",
        f"job {first.id} on explain-real",
    )
    assert second.refresh().status == Status.PENDING  # four slots, one limit
    wait_for(lambda: second.refresh().status == Status.COMPLETED, timeout=60)
    assert second.explain().code == Why.FINISHED
    running.stop()
