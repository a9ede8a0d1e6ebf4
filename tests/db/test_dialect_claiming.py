"""The claiming half of the dialect conformance suite: the same tests of the interface
(``claim``, ``apply_settlements``, ``turn``) on every database leg (PostgreSQL, SQLite
with ``-m sqlite``, MariaDB/MySQL), so each dialect is held to one behaviour.

The tests speak to the jobs database's dialect directly, with the values the store
hands it (a ``ClaimSpec`` from ``claim.prepare``, ``SettleRow`` s from
``settle.settle_rows``, the run ``TALLY``), and read the tables to see what it wrote:
what a claim takes and how it marks it, caps, global limits, paused queues, priority
floors and tiers, a guarded settlement with its journal entry and tally, a stale
run's settlement refused whole, an operator's cancel request, a turn.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import models
from django.db.models import Sum
from django.utils import timezone

from django_jobqueue import Priority, Status, store
from django_jobqueue.models import Job, JournalEntry, RunTally
from django_jobqueue.rules.lifecycle import Run, Settlement, completed, released
from django_jobqueue.store import ClaimRequest, sql
from django_jobqueue.store.claim import prepare
from django_jobqueue.store.dialects import Dialect
from django_jobqueue.store.dialects.base.claiming import ClaimSpec
from django_jobqueue.store.settling import TALLY, settle_rows
from tests.taskapp import tasks

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

ADD, NOOP = tasks.add.kind, tasks.noop.kind


@pytest.fixture
def d() -> Dialect:
    return sql.dialect()


def spec_of(worker: str = "w:1", **claim: Any) -> ClaimSpec:
    prepared = prepare(
        worker_id=worker, request=ClaimRequest(**{"limit": 10, "kinds": [ADD, NOOP], **claim})
    )
    assert prepared is not None
    return prepared.spec


def claimed_ids(d: Dialect, spec: ClaimSpec) -> list[uuid.UUID]:
    """What ``d`` claims for ``spec``, in claim order (priority, visibility, id)."""
    rows = d.claim(spec)
    assert isinstance(rows, list)
    for row in rows:
        assert len(row) == 13  # the CLAIMED columns
    rows.sort(key=lambda r: (r[4], d.read_dt(r[5]), d.read_uuid(r[0])))
    return [d.read_uuid(r[0]) for r in rows]


def ending(job_id: uuid.UUID, *, worker: str = "w:1", run_no: int = 1) -> Settlement:
    return completed(Run(job_id=job_id, kind=ADD, run_no=run_no, worker=worker), result=run_no)


def settle(d: Dialect, *settlements: Settlement) -> set[uuid.UUID]:
    return d.apply_settlements(settle_rows(settlements, timezone.now(), held=True), TALLY)


def test_a_claim_takes_runnable_jobs_in_claim_order_and_marks_them_claimed(d: Dialect) -> None:
    low = tasks.add.using(priority=Priority.LOW).enqueue(0, 1)
    old = tasks.add.enqueue(0, 2)
    high = tasks.noop.using(priority=Priority.HIGH).enqueue()
    tasks.add.using(delay=timedelta(minutes=5)).enqueue(0, 3)  # not yet visible
    spec = spec_of(limit=10, lease=timedelta(minutes=2))

    assert claimed_ids(d, spec) == [high.id, old.id, low.id]

    for job in Job.objects.filter(id__in=[low.id, old.id, high.id]):
        assert (job.status, job.claimed_by, job.run_count) == (Status.CLAIMED, "w:1", 1)
        assert job.claim_expires_at == spec.default_expiry
    assert claimed_ids(d, spec_of(worker="w:2")) == []  # nothing left to take


def test_a_claim_takes_no_more_than_its_slots_and_its_kinds(d: Dialect) -> None:
    adds = [tasks.add.enqueue(0, n) for n in range(3)]
    tasks.noop.enqueue()
    assert claimed_ids(d, spec_of(limit=2, kinds=[ADD])) == [adds[0].id, adds[1].id]


# Names a list parameter must carry intact: PostgreSQL sends a list of names as the text
# of one array (``text_array``), where a quote, a backslash, a comma, a brace, a space or
# the word NULL each mean something.
AWKWARD = ['we"ird', "back\\slash", "a,b", "{brace}", "two words", "NULL", "", 'é"\\,']


def test_a_claim_takes_kinds_and_queues_by_their_exact_names(d: Dialect) -> None:
    made = {
        name: tasks.add.using(queue=f"q-{name}").enqueue(0, i) for i, name in enumerate(AWKWARD)
    }
    Job.objects.filter(id__in=[h.id for h in made.values()]).update(kind=models.F("queue"))
    kinds = [f"q-{name}" for name in AWKWARD]
    # Each name claims its own job and no other's, as kind and as queue.
    for name, handle in made.items():
        assert claimed_ids(d, spec_of(limit=5, kinds=[f"q-{name}", "q-none"])) == [handle.id]
    assert claimed_ids(d, spec_of(limit=20, kinds=kinds)) == []
    Job.objects.filter(id__in=[h.id for h in made.values()]).update(status=Status.PENDING)
    got = claimed_ids(d, spec_of(limit=20, kinds=kinds, queues=kinds[:3]))
    assert sorted(got) == sorted(made[name].id for name in AWKWARD[:3])


def test_a_kind_with_its_own_lease_gets_its_own_expiry(d: Dialect) -> None:
    short = tasks.noop.enqueue()
    normal = tasks.add.enqueue(1, 1)
    spec = spec_of(leases={NOOP: timedelta(seconds=5)}, lease=timedelta(minutes=1))
    claimed_ids(d, spec)
    assert Job.objects.get(id=short.id).claim_expires_at == spec.now + timedelta(seconds=5)
    assert Job.objects.get(id=normal.id).claim_expires_at == spec.default_expiry


def test_a_cap_and_a_global_limit_each_hold_a_kind_back(d: Dialect) -> None:
    adds = [tasks.add.enqueue(0, n) for n in range(4)]
    noop = tasks.noop.enqueue()
    assert claimed_ids(d, spec_of(kind_limits={ADD: 1})) == [adds[0].id, noop.id]
    # One add is claimed now: a global limit of two leaves one more slot.
    assert claimed_ids(d, spec_of(max_in_flight={ADD: 2})) == [adds[1].id]
    assert claimed_ids(d, spec_of(max_in_flight={ADD: 2})) == []
    assert claimed_ids(d, spec_of(max_in_flight={ADD: 4}, kind_limits={ADD: 1})) == [adds[2].id]


def test_a_claim_leaves_the_jobs_of_a_paused_queue(d: Dialect) -> None:
    mail = tasks.add.using(queue="mail").enqueue(1, 2)
    other = tasks.add.enqueue(1, 3)
    store.pause_queue(queue="mail")
    assert claimed_ids(d, spec_of()) == [other.id]
    store.resume_queue(queue="mail")
    assert claimed_ids(d, spec_of()) == [mail.id]


def test_a_floor_and_preferring_tiers_decide_which_priorities_a_claim_takes(d: Dialect) -> None:
    high = [tasks.add.using(priority=Priority.HIGH).enqueue(0, n) for n in range(2)]
    low = [tasks.add.using(priority=Priority.LOW).enqueue(0, n) for n in range(2)]
    assert claimed_ids(d, spec_of(floor=Priority.LOW)) == [low[0].id, low[1].id]
    # Two slots, one preferring priority >= LOW: nothing is left there (all claimed),
    # so it falls back to the floor with the other slot: both take the next in order.
    assert claimed_ids(d, spec_of(limit=2, preferring={Priority.LOW: 1})) == [h.id for h in high]


def test_a_settlement_applies_its_row_journal_entry_and_tally_together(d: Dialect) -> None:
    a, b = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    claimed_ids(d, spec_of())
    tallied = RunTally.objects.filter(kind=ADD).aggregate(n=Sum("runs"))["n"] or 0

    assert settle(d, ending(a.id), ending(b.id)) == {a.id, b.id}

    for job in (a, b):
        row = Job.objects.get(id=job.id)
        assert (row.status, row.result, row.claimed_by) == (Status.COMPLETED, 1, "")
        assert row.claim_expires_at is None
        assert row.finished_at is not None
        [entry] = JournalEntry.objects.filter(job_id=job.id)
        assert (entry.outcome, entry.run_no, entry.worker) == ("completed", 1, "w:1")
    assert RunTally.objects.filter(kind=ADD).aggregate(n=Sum("runs"))["n"] == tallied + 2


def test_a_settlement_whose_claim_is_not_its_own_writes_nothing(d: Dialect) -> None:
    mine, taken, stale = (tasks.add.enqueue(n, n) for n in range(3))
    claimed_ids(d, spec_of())
    Job.objects.filter(id=taken.id).update(claimed_by="w:2")
    # A stale epoch: the job was recovered and claimed again, so run 1 no longer holds it.
    Job.objects.filter(id=stale.id).update(run_count=2)

    done = settle(d, ending(mine.id), ending(taken.id), ending(stale.id))

    assert done == {mine.id}
    for job in (taken, stale):
        row = Job.objects.get(id=job.id)
        assert (row.status, row.result) == (Status.CLAIMED, None)
        assert not JournalEntry.objects.filter(job_id=job.id).exists()


def test_an_operators_cancel_request_turns_a_return_to_pending_into_cancelled(d: Dialect) -> None:
    job = tasks.add.enqueue(1, 1)
    claimed_ids(d, spec_of())
    Job.objects.filter(id=job.id).update(cancel_requested=True, cancel_actor="ops")
    back = released(
        Run(job_id=job.id, kind=ADD, run_no=1, worker="w:1"), now=timezone.now(), note=""
    )

    assert settle(d, back) == {job.id}

    row = Job.objects.get(id=job.id)
    assert (row.status, row.cancel_requested) == (Status.CANCELLED, False)
    [entry] = JournalEntry.objects.filter(job_id=job.id)
    assert (entry.outcome, entry.actor) == ("cancelled", "ops")
    assert "released" in entry.note


def test_a_turn_settles_then_claims_and_its_lost_settlement_writes_nothing(d: Dialect) -> None:
    first, second = tasks.add.enqueue(1, 1), tasks.add.enqueue(2, 2)
    claimed_ids(d, spec_of(limit=2))
    third = tasks.add.enqueue(3, 3)
    Job.objects.filter(id=second.id).update(claimed_by="w:2")  # taken over
    rows = settle_rows([ending(first.id), ending(second.id)], timezone.now(), held=True)

    done, claimed = d.turn(rows, TALLY, spec_of(limit=2))

    assert done == {first.id}
    assert [d.read_uuid(r[0]) for r in claimed] == [third.id]
    assert Job.objects.get(id=first.id).status == Status.COMPLETED
    assert Job.objects.get(id=second.id).claimed_by == "w:2"
    assert not JournalEntry.objects.filter(job_id=second.id).exists()
    assert Job.objects.get(id=third.id).claimed_by == "w:1"
