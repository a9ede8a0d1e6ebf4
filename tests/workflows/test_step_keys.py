"""A workflow step's key (issue 31): kept as an enqueue keeps it, explicit
(``.using(key=...)``) or computed (the task's ``key=``), and its per-key rules applied
to the step once released, by the worker's turn that releases it as by any claim."""

from __future__ import annotations

from typing import Any

import pytest

from django_jobqueue import Status, chain, chord, store
from django_jobqueue.models import Job
from django_jobqueue.rules.lifecycle import Run, completed
from django_jobqueue.store import KeyRule
from django_jobqueue.store.exchanging import exchange
from django_jobqueue.task.registry import registry
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

WORKER = "step-keys-worker"
KEYED = tasks.keyed.kind


def _options(**more: Any) -> store.ClaimRequest:
    options = {"limit": 50, "kinds": registry.kinds(), "leases": registry.leases(), **more}
    return store.ClaimRequest(**options)


def _done(job: store.Claimed, *, step: bool) -> Any:
    run = Run(job_id=job.id, kind=job.kind, run_no=job.run_count, worker=WORKER, step=step)
    return completed(run, result=1)


def _claimed_of_key(key: str) -> int:
    return Job.objects.filter(kind=KEYED, key=key, status=Status.CLAIMED).count()


def test_a_chains_and_a_chords_steps_keep_their_explicit_and_computed_keys() -> None:
    flow = chain(
        tasks.wf_value.s(x=1),
        tasks.keyed.using(key="tenant-a").s(n=1),
        tasks.per_shop.s(shop=3, seconds=0),
    ).enqueue()
    joined = chord(
        [tasks.keyed.using(key="tenant-b").s(n=2), tasks.per_shop.s(shop=4, seconds=0)],
        tasks.keyed.using(key="tenant-c").s(),
    ).enqueue()

    keys = sorted(
        (kind, key)
        for kind, key in Job.objects.filter(workflow_id__in=[flow.id, joined.id]).values_list(
            "kind", "key"
        )
    )
    assert keys == sorted(
        [
            (tasks.wf_value.kind, None),
            (KEYED, "tenant-a"),
            (tasks.per_shop.kind, "shop:3"),
            (KEYED, "tenant-b"),
            (tasks.per_shop.kind, "shop:4"),
            (KEYED, "tenant-c"),
        ]
    )


def test_a_step_released_while_its_keys_place_is_taken_stays_pending_until_it_frees() -> None:
    """Most one per key: the turn completing the step's parent leaves the step pending
    while another job of its key is claimed; the turn completing that job claims it."""
    rule = {"per_key": {KEYED: KeyRule(most=1)}}
    holder = tasks.keyed.using(key="a").enqueue(n=0)
    flow = chain(tasks.wf_value.s(x=1), tasks.keyed.using(key="a").s(n=1)).enqueue()
    claimed = store.claim_jobs(worker_id=WORKER, request=_options(**rule))
    by_id = {c.id: c for c in claimed}
    assert set(by_id) == {holder.id, flow.steps["0"].id}

    applied, taken = exchange(
        worker_id=WORKER,
        settlements=[_done(by_id[flow.steps["0"].id], step=True)],
        request=_options(**rule),
    )

    step = Job.objects.get(id=flow.steps["1"].id)
    assert applied == [True]
    assert taken == []
    assert (step.status, step.key) == (Status.PENDING, "a")
    assert _claimed_of_key("a") == 1

    applied, taken = exchange(
        worker_id=WORKER,
        settlements=[_done(by_id[holder.id], step=False)],
        request=_options(**rule),
    )

    assert applied == [True]
    assert [c.id for c in taken] == [step.id]
    assert _claimed_of_key("a") == 1


def test_a_released_step_of_a_kind_without_key_rules_is_still_claimed_by_its_turn() -> None:
    """The common case keeps its shortcut: key rules of another kind change nothing."""
    rule = {"per_key": {KEYED: KeyRule(most=1)}}
    flow = chain(tasks.wf_value.s(x=1), tasks.wf_value.s(x=2)).enqueue()
    [first] = store.claim_jobs(worker_id=WORKER, request=_options(**rule))

    applied, taken = exchange(
        worker_id=WORKER,
        settlements=[_done(first, step=True)],
        request=_options(**rule),
    )

    assert applied == [True]
    assert [c.id for c in taken] == [flow.steps["1"].id]
