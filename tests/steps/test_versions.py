"""Durable work that survives a deploy, through the public API, in-process (``run_jobs``):
a replay that meets another sequence of steps than the job recorded dies of
``StepDivergence`` naming them, ``ctx.patched`` decides old or new code once per job, and
``rerun_from`` re-runs a job from a recorded step after a fix.

A "deploy" re-registers the test's task under the same kind with other steps (the same
origin, so the registry replaces it, as a worker started on the new release would have
it), inside ``registry.isolated()`` so the suite's registry is left as it was."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_jobqueue import (
    Context,
    InvalidStep,
    InvalidTransition,
    JobNotFound,
    Outcome,
    Permanent,
    Status,
    StepDivergence,
    job,
    run_now,
    store,
    task,
)
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.run.transactional import run as run_job
from django_jobqueue.store import recover_expired
from django_jobqueue.task.registry import registry
from django_jobqueue.testing import run_jobs
from tests.helpers import recorded
from tests.taskapp.models import Effect

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

KIND = "tests.steps.deployed"


@pytest.fixture(autouse=True)
def isolated() -> Iterator[None]:
    with registry.isolated():
        yield


def deploy(release: str, *plan: str) -> Any:
    """Register the task as release ``release`` would have it: ``plan`` in order, each
    a step name (``"c#2"``: step c at version 2), ``"sleep"`` (an hour), ``"patch:X"``
    (``ctx.patched("X")``), ``"deprecate:X"`` or ``"fail"`` (dies, Permanent)."""

    def deployed(ctx: Context) -> list[Any]:
        out: list[Any] = []
        for item in plan:
            if item == "sleep":
                ctx.sleep(3600)
            elif item == "fail":
                raise Permanent(f"release {release} fails after {out}")
            elif item.startswith("patch:"):
                out.append(f"{item[6:]}:{ctx.patched(item[6:])}")
            elif item.startswith("deprecate:"):
                ctx.deprecate_patch(item[10:])
            else:
                name, _, version = item.partition("#")
                kw = {"version": int(version)} if version else {}
                out.append(ctx.step(name, effect, ctx, name, release, **kw))
        return out

    return task(takes_context=True, kind=KIND, max_failures=None)(deployed)


def effect(ctx: Context, step: str, release: str) -> str:
    """A step's side effect: a row naming the step and the run that did it."""
    Effect.objects.create(job_id=ctx.job_id, run_no=ctx.run_count, worker=step)
    return f"{step}@{release}"


def effects(job_id: uuid.UUID) -> list[tuple[str, int]]:
    rows = Effect.objects.filter(job_id=job_id).order_by("id")
    return list(rows.values_list("worker", "run_no"))


def wake(job_id: uuid.UUID) -> None:
    """End a parked job's sleep now and run what is runnable."""
    run_now(job_id)
    run_jobs()


def last_note(job_id: uuid.UUID) -> str:
    return JournalEntry.objects.filter(job_id=job_id).order_by("-id").first().note  # type: ignore[union-attr]


# --- divergence ----------------------------------------------------------------------


def test_a_job_recorded_at_a_b_and_redeployed_as_a_c_b_dies_of_step_divergence() -> None:
    handle = job(deploy("1", "a", "b", "sleep", "d").enqueue().id)
    run_jobs()
    assert [r["name"] for r in recorded(handle.id)] == ["a", "b", "sleep 1"]
    deploy("2", "a", "c", "b", "sleep", "d")
    wake(handle.id)
    handle.refresh()
    assert handle.status == Status.DEAD
    assert handle.failure_count == 1  # dead at once: a retry would diverge again
    note = last_note(handle.id)
    assert note.startswith("StepDivergence: ")
    assert "at 'c'" in note
    assert "recorded ['a', 'b', 'sleep 1']" in note
    assert "this run ['a', 'c']" in note
    # Nothing of c ran or was recorded; a and b did not run again.
    assert effects(handle.id) == [("a", 1), ("b", 1)]
    assert [r["name"] for r in recorded(handle.id)] == ["a", "b", "sleep 1"]


@pytest.mark.parametrize(
    ("plan", "step", "why"),
    [
        (("b", "a", "sleep"), "b", "recorded at position 2, met at 1"),  # reordered
        (("a", "x", "sleep"), "x", "not recorded, and the job recorded 'b' at its position (2)"),
        (("b", "sleep"), "b", "recorded at position 2, met at 1"),  # a removed
        (("a#2", "b", "sleep"), "a", "recorded at version None, the code is at version 2"),
    ],
)
def test_reordered_renamed_removed_or_reversioned_steps_diverge(
    plan: tuple[str, ...], step: str, why: str
) -> None:
    handle = deploy("1", "a", "b", "sleep").enqueue()
    run_jobs()
    deploy("2", *plan)
    wake(handle.id)
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    note = last_note(handle.id)
    assert f"StepDivergence: {KIND}: job {handle.id} diverged" in note
    assert f"at {step!r} ({why})" in note


def test_the_same_steps_at_the_same_versions_replay_and_complete() -> None:
    handle = deploy("1", "a#3", "sleep", "b").enqueue()
    run_jobs()
    deploy("2", "a#3", "sleep", "b")
    wake(handle.id)
    job_row = Job.objects.get(id=handle.id)
    assert job_row.status == Status.COMPLETED
    assert job_row.result == ["a@1", "b@2"]
    assert [(r["name"], r["seq"], r.get("version")) for r in recorded(handle.id)] == [
        ("a", 0, 3),
        ("sleep 1", 1, None),
        ("b", 2, None),
    ]


def test_records_without_a_fingerprint_are_replayed_unchecked() -> None:
    """Records written before fingerprints (no ``seq``) are unversioned: not checked."""
    handle = deploy("1", "a", "b", "sleep", "c").enqueue()
    run_jobs()
    from django_jobqueue.models import StepRecord

    for row in StepRecord.objects.filter(job_id=handle.id):
        row.record = {k: v for k, v in row.record.items() if k != "seq"}
        row.save()
    deploy("2", "b", "a", "sleep", "c")  # reordered: unseen without fingerprints
    wake(handle.id)
    assert Job.objects.get(id=handle.id).status == Status.COMPLETED


def test_a_task_that_catches_the_divergence_cannot_run_on_into_more_steps() -> None:
    caught: list[StepDivergence] = []

    @task(takes_context=True, kind=KIND, max_failures=None)
    def deployed(ctx: Context) -> str:
        ctx.step("a", effect, ctx, "a", "1")
        if ctx.run_count == 1:
            ctx.step("b", effect, ctx, "b", "1")
            ctx.sleep(3600)
        try:
            ctx.step("c", effect, ctx, "c", "2")
        except StepDivergence as exc:
            caught.append(exc)
        ctx.step("d", effect, ctx, "d", "2")
        return "ran on"

    handle = deployed.enqueue()
    run_jobs()
    wake(handle.id)
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert "StepDivergence" in last_note(handle.id)
    assert [name for name, _ in effects(handle.id)] == ["a", "b"]
    [exc] = caught
    assert (exc.step, exc.recorded, exc.current) == ("c", ["a", "b", "sleep 1"], ["a", "c"])


# --- patches ---------------------------------------------------------------------------


def test_patched_is_false_for_the_run_in_flight_and_true_for_a_new_one_on_every_replay() -> None:
    old = deploy("1", "a", "sleep", "b", "sleep", "c").enqueue()
    run_jobs()  # parked after a: recorded before the change
    deploy("2", "a", "patch:fix", "sleep", "b", "sleep", "c")
    new = deploy("2", "a", "patch:fix", "sleep", "b", "sleep", "c").enqueue()
    run_jobs()  # the new job decides, records and parks
    for _ in range(2):  # each job replays its decision at every wake
        wake(old.id)
        wake(new.id)
    old_row, new_row = Job.objects.get(id=old.id), Job.objects.get(id=new.id)
    assert (old_row.status, new_row.status) == (Status.COMPLETED, Status.COMPLETED)
    assert old_row.result == ["a@1", "fix:False", "b@2", "c@2"]
    assert new_row.result == ["a@2", "fix:True", "b@2", "c@2"]
    patches = [r for r in recorded(old.id) + recorded(new.id) if r["kind"] == "patch"]
    assert [(p["name"], p["result"]) for p in patches] == [("fix", False), ("fix", True)]


def test_deprecate_patch_lets_new_runs_on_and_stops_a_run_recorded_before_the_change() -> None:
    before = deploy("1", "a", "sleep", "b").enqueue()
    run_jobs()
    after = deploy("2", "a", "patch:fix", "sleep", "b").enqueue()
    run_jobs()
    deploy("3", "a", "deprecate:fix", "sleep", "b")
    fresh = deploy("3", "a", "deprecate:fix", "sleep", "b").enqueue()
    run_jobs()
    wake(before.id)
    wake(after.id)
    wake(fresh.id)
    assert Job.objects.get(id=after.id).status == Status.COMPLETED
    assert Job.objects.get(id=fresh.id).status == Status.COMPLETED
    # The fresh run recorded its decision: a worker still on release 2 takes the new path.
    assert [r["result"] for r in recorded(fresh.id) if r["kind"] == "patch"] == [True]
    assert Job.objects.get(id=before.id).status == Status.DEAD
    assert "at 'patch fix' (this run was recorded before the change" in last_note(before.id)


def test_a_bad_change_id_fails_the_run_naming_it() -> None:
    @task(takes_context=True, kind=KIND, max_failures=1)
    def deployed(ctx: Context) -> bool:
        return ctx.patched("")

    handle = deployed.enqueue()
    run_jobs()
    assert Job.objects.get(id=handle.id).status == Status.DEAD
    assert "InvalidStep: ctx.patched()'s change id" in last_note(handle.id)
    assert recorded(handle.id) == []


# --- re-running from a step ------------------------------------------------------------


def _claim(job_id: uuid.UUID, worker: str) -> store.Claimed:
    [claimed] = store.claim_jobs(
        worker_id=worker, request=store.ClaimRequest(limit=1, kinds=[KIND])
    )
    assert claimed.id == job_id
    return claimed


def _run(claimed: store.Claimed, worker: str) -> Any:
    from django_jobqueue.run.context import Context as RunContext

    return run_job(
        registry.get(KIND),
        claimed,
        RunContext.for_job(claimed),
        alias="default",
        worker_id=worker,
        max_output_bytes=1 << 20,
    )


def test_rerun_from_c_after_a_fix_runs_c_and_what_follows_once_a_stale_run_records_none() -> None:
    handle = job(deploy("1", "a", "b", "c", "sleep", "d", "fail").enqueue().id)
    run_jobs()  # a, b and c (with the bug) recorded; parked
    run_now(handle.id)
    stale = _claim(handle.id, "w-stale")  # run 2 starts on the old release...
    with pytest.raises(InvalidTransition, match=r"is running .*'w-stale', run 2.*in flight"):
        handle.rerun_from("c")
    # ...and loses its claim (its worker stalls past its lease).
    Job.objects.filter(id=handle.id).update(claim_expires_at=timezone.now() - timedelta(1))
    assert recover_expired() == 1
    deploy("2", "a", "b", "c", "sleep", "d")  # the fix: no more "fail"
    handle.rerun_from("c", actor="ops@example")
    assert handle.status == Status.PENDING
    assert [r["name"] for r in recorded(handle.id)] == ["a", "b"]
    entry = JournalEntry.objects.filter(job_id=handle.id).order_by("-id").first()
    assert entry is not None
    assert entry.outcome == Outcome.REQUEUED
    assert entry.actor == "ops@example"
    assert (
        "re-run from step 'c' while pending (2 record(s) discarded: 'c', 'sleep 1')" in entry.note
    )
    # The stale run of the old attempt goes on: it records nothing.
    assert _run(stale, "w-stale").lost
    assert [r["name"] for r in recorded(handle.id)] == ["a", "b"]
    run_jobs()
    wake(handle.id)
    handle.refresh()
    assert handle.status == Status.COMPLETED
    assert handle.result == ["a@1", "b@1", "c@2", "d@2"]
    runs = {name: [n for s, n in effects(handle.id) if s == name] for name in "abcd"}
    # After the re-run, c and d once each (runs 3 and 4, around the sleep); a and b
    # never again; whatever the stale run 2 did is its own, none of it recorded.
    assert (runs["a"], runs["b"], runs["d"]) == ([1], [1], [4])
    assert [n for n in runs["c"] if n != 2] == [1, 3]
    assert [r["run"] for r in recorded(handle.id)] == [1, 1, 3, 3, 4]


def test_rerun_from_clears_a_divergence_and_the_job_completes_on_the_new_code() -> None:
    handle = job(deploy("1", "a", "b", "sleep").enqueue().id)
    run_jobs()
    deploy("2", "a", "c", "b", "sleep")
    wake(handle.id)
    assert handle.refresh().status == Status.DEAD
    handle.rerun_from("b")
    run_jobs()
    wake(handle.id)
    assert handle.refresh().status == Status.COMPLETED
    assert handle.result == ["a@1", "c@2", "b@2"]


def test_rerun_from_refuses_bad_input_naming_it_and_writes_nothing() -> None:
    handle = job(deploy("1", "a", "b", "sleep").enqueue().id)
    run_jobs()
    before = JournalEntry.objects.filter(job_id=handle.id).count()
    with pytest.raises(InvalidStep, match=r"recorded no step named 'z'.*\['a', 'b', 'sleep 1'\]"):
        handle.rerun_from("z")
    with pytest.raises(InvalidStep, match="takes a step name"):
        handle.rerun_from("")
    with pytest.raises(JobNotFound, match="No job with id"):
        store.rerun_from(job_id=uuid.uuid4(), step="a")
    assert len(recorded(handle.id)) == 3
    assert JournalEntry.objects.filter(job_id=handle.id).count() == before
    assert Job.objects.get(id=handle.id).parked == "sleep"


def test_rerun_from_a_parked_job_wakes_it_with_the_records_before_the_step() -> None:
    handle = job(deploy("1", "a", "b", "sleep", "c").enqueue().id)
    run_jobs()
    handle.rerun_from("b")
    row = Job.objects.get(id=handle.id)
    assert (row.status, row.parked, row.wake_at) == (Status.PENDING, "", None)
    run_jobs()  # b runs again and the job sleeps again
    assert [r["name"] for r in recorded(handle.id)] == ["a", "b", "sleep 1"]
    assert effects(handle.id) == [("a", 1), ("b", 1), ("b", 2)]
