"""The turn that settles a step claims what that settlement released: a chain moves on
in the same round of its worker's loop, not a turn (or a wake-up) later."""

from __future__ import annotations

import pytest

from django_jobqueue import chain, store
from django_jobqueue.rules.lifecycle import Run, completed, failure
from django_jobqueue.store import ClaimRequest
from django_jobqueue.store.exchanging import exchange
from django_jobqueue.task.registry import policy_for, registry
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKER = "handoff-worker"


def _claim_options() -> dict[str, object]:
    return {"limit": 4, "kinds": registry.kinds(), "leases": registry.leases()}


def _claim_first() -> store.Claimed:
    (job,) = store.claim_jobs(worker_id=WORKER, request=store.ClaimRequest(**_claim_options()))  # type: ignore[arg-type]
    return job


def _run(job: store.Claimed) -> Run:
    return Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker=WORKER, step=True)


def test_a_turn_that_completes_a_step_claims_the_step_it_released() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    job = _claim_first()
    assert job.id == handle.steps["0"].id

    applied, claimed = exchange(
        worker_id=WORKER,
        settlements=[completed(_run(job), result=1)],
        request=ClaimRequest(**_claim_options()),
    )

    assert applied == [True]
    assert [c.id for c in claimed] == [handle.steps["1"].id]


def test_a_turn_that_retries_a_step_releases_and_claims_nothing_of_its_children() -> None:
    handle = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    job = _claim_first()
    retry = failure(
        _run(job),
        failure_count=0,
        policy=policy_for(job.kind),
        now=job.claim_expires_at,
        note="RuntimeError: planned",
    )

    applied, claimed = exchange(
        worker_id=WORKER, settlements=[retry], request=ClaimRequest(**_claim_options())
    )

    assert applied == [True]
    assert handle.steps["1"].id not in {c.id for c in claimed}
    assert handle.refresh().steps["1"].status == "waiting"
