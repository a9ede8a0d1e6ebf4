"""A Hypothesis stateful test: the storage layer and the public API against the model.

Each step is one operation a producer, a worker, the maintenance loop or an operator
performs: enqueue (plain, with an idempotency key, scheduled, or a mergeable task in
each merge mode), claim, the end of a run (completed, paused, retried, permanent,
released, the backstop once failures reach the limit), the clock moving on, stale
recovery, lease extension, cancel, requeue and cleanup. Time is a controllable clock
(real now plus an offset that only grows) handed to the store as ``now=``. After every
step the database and the model (``model.py``) must agree on every job's status,
counters, carry, result, payload, lease, visibility and journal, and on the counts.

``MODEL_EXAMPLES`` sets the number of examples (default: the ``lifecycle-ci`` profile's
200); ``MODEL_STEPS`` the steps per example.
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import django_jobqueue
from django_jobqueue import store
from django_jobqueue.errors import InvalidTransition, JobNotFound
from django_jobqueue.models import Job, JournalEntry
from django_jobqueue.rules.lifecycle import Policy, Run, Settlement
from django_jobqueue.rules.lifecycle import released as released_settlement
from django_jobqueue.run.executor import RunResult, decide
from django_jobqueue.store import Claimed
from tests.model import model as m
from tests.taskapp import tasks

settings.register_profile(
    "lifecycle-ci",
    max_examples=200,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
settings.register_profile(
    "lifecycle-long",
    parent=settings.get_profile("lifecycle-ci"),
    max_examples=2000,
    stateful_step_count=50,
)

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

PLAIN = tasks.add.kind
SYNC = tasks.Sync.kind
KINDS = [PLAIN, SYNC]
WORKERS = ["model-a:1", "model-b:2"]
POLICY = Policy(
    max_failures=m.MAX_FAILURES,
    lease=m.LEASE,
    backoff_base=m.BACKOFF_BASE,
    backoff_cap=m.BACKOFF_CAP,
    backoff_jitter=m.BACKOFF_JITTER,
)
RUN_ENDS = ["complete", "pause", "retry", "permanent", "release"]
carries = st.dictionaries(st.sampled_from(["cursor", "n"]), st.integers(0, 9), max_size=2)
items = st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True)


@dataclass(frozen=True)
class RunEnd:
    """How a simulated run ends: its kind of ending and what it leaves behind."""

    end: str  # one of RUN_ENDS
    carry: dict[str, Any]
    value: Any
    resume_in: int

    def expected(self, job: m.MJob, now: datetime) -> m.Ending:
        """The model's ending for it (the backstop is the model's to apply)."""
        if self.end == "complete":
            return m.completed(self.value)
        if self.end == "pause":
            return m.paused(now, timedelta(seconds=self.resume_in), self.carry)
        if self.end == "permanent":
            return m.permanent(self.carry)
        if self.end == "release":
            return m.released(now)
        return m.failed(job, now, self.carry)


run_ends = st.builds(
    RunEnd,
    end=st.sampled_from(RUN_ENDS),
    carry=carries,
    value=st.one_of(st.none(), st.integers(0, 9), st.text("xyz", max_size=3)),
    resume_in=st.sampled_from([0, 7, 40]),
)


@dataclass
class InFlight:
    """A run a simulated worker started and has not ended (its claim may be gone)."""

    claimed: Claimed
    worker: str


class LifecycleMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        JournalEntry.objects.all().delete()
        Job.objects.all().delete()
        tasks.MERGE_MODE.clear()
        self.model = m.Model()
        # The controllable clock starts a day ahead of the real one, so that whatever the
        # store stamps with the real now (an enqueue, a requeue, a merge) is already
        # visible, and a step's outcome never depends on how long the steps took.
        self.start = timezone.now() + timedelta(days=1)
        self.offset = timedelta(0)
        self.runs: list[InFlight] = []
        self.ids: list[uuid.UUID] = []  # every id ever enqueued, cleaned-up ones included

    def clock(self) -> datetime:
        return self.start + self.offset

    def teardown(self) -> None:
        tasks.MERGE_MODE.clear()

    # --- producers ------------------------------------------------------------------------

    @rule(
        a=st.integers(0, 9),
        priority=st.sampled_from([0, 1, 2]),
        key=st.sampled_from([None, None, "k1", "k2"]),
        later=st.sampled_from([None, None, 10, 100]),
    )
    def enqueue_plain(self, a: int, priority: int, key: str | None, later: int | None) -> None:
        run_at = None if later is None else self.clock() + timedelta(seconds=later)
        holder = None if key is None else self.model.active_with_key(key)
        handle = tasks.add.using(priority=priority, idempotency_key=key, run_at=run_at).enqueue(
            a=a, b=1
        )
        after = timezone.now()
        if holder is not None:
            assert (handle.disposition, handle.id) == ("reused", holder.id)
            return
        assert handle.disposition == "inserted"
        self.remember(
            m.MJob(
                id=handle.id,
                kind=PLAIN,
                payload={"a": a, "b": 1},
                priority=priority,
                visible_at=run_at or after,
                exact=run_at is not None,
                idempotency_key=key,
            )
        )

    @rule(
        account=st.sampled_from([1, 2]),
        items=items,
        mode=st.sampled_from(["union", "keep", "replace", "independent"]),
    )
    def enqueue_sync(self, account: int, items: list[str], mode: str) -> None:
        tasks.MERGE_MODE["mode"] = mode
        candidates = self.model.merge_candidates(SYNC, str(account))
        before = timezone.now()
        handle = tasks.Sync(account_id=account, items=items).enqueue()
        after = timezone.now()
        incoming = {"account_id": account, "full": False, "items": items}
        if not candidates or mode == "independent":
            assert handle.disposition == "inserted"
            self.remember(
                m.MJob(
                    id=handle.id,
                    kind=SYNC,
                    payload=incoming,
                    priority=1,
                    visible_at=after,
                    exact=False,
                    dedup_key=str(account),
                )
            )
            return
        target = candidates[0]
        assert (handle.disposition, handle.id) == ("merged", target.id)
        if mode != "keep":
            if mode == "union":
                union = sorted(set(target.payload["items"]) | set(items))
                target.payload = {**incoming, "items": union}
                target.carry = {**target.carry, "merged": target.carry.get("merged", 0) + 1}
            else:
                target.payload, target.carry = incoming, {}
            if not (target.exact and target.visible_at <= before):
                target.visible_at, target.exact = after, False
        target.journal.append(("merged", target.run_count))

    def remember(self, job: m.MJob) -> None:
        assert job.id not in self.model.jobs
        self.model.add(job)
        self.ids.append(job.id)

    # --- workers ----------------------------------------------------------------------------

    @initialize(count=st.integers(1, 3))
    def some_jobs(self, count: int) -> None:
        for a in range(count):
            self.enqueue_plain(a, 1, None, None)

    @rule(worker=st.sampled_from(WORKERS), limit=st.integers(1, 3))
    def claim(self, worker: str, limit: int) -> None:
        now = self.clock()
        claimable = self.model.claimable(now)
        got = store.claim_jobs(
            worker_id=worker,
            request=store.ClaimRequest(limit=limit, kinds=KINDS, lease=m.LEASE, now=now),
        )
        assert len(got) == min(limit, len(claimable))
        # Claim order: priority, then when each became runnable (as stored), then id.
        stored = dict(
            Job.objects.filter(id__in=[j.id for j in claimable]).values_list("id", "visible_at")
        )
        expected_first = sorted(claimable, key=lambda j: (j.priority, stored.get(j.id), j.id))
        assert {c.id for c in got} <= {j.id for j in claimable}
        assert [c.id for c in got] == [j.id for j in expected_first[: len(got)]]
        for c in got:
            job = self.model.jobs[c.id]
            assert (c.payload, c.carry, c.failure_count) == (
                job.payload,
                job.carry,
                job.failure_count,
            )
            self.model.claim(job, worker, now)
            assert c.run_count == job.run_count
            self.runs.append(InFlight(c, worker))

    @precondition(lambda self: self.runs)
    @rule(pick=st.integers(0, 100), how=run_ends)
    def end_run(self, pick: int, how: RunEnd) -> None:
        self.finish([(self.runs.pop(pick % len(self.runs)), how)])

    @precondition(lambda self: len(self.runs) >= 2)
    @rule(picks=st.lists(st.integers(0, 100), min_size=2, max_size=4), hows=st.data())
    def end_runs_in_one_batch(self, picks: list[int], hows: st.DataObject) -> None:
        """Several runs settled in one statement, as a worker settles a turn's runs."""
        batch = []
        for pick in picks:
            if self.runs:
                batch.append((self.runs.pop(pick % len(self.runs)), hows.draw(run_ends)))
        self.finish(batch)

    @rule(worker=st.sampled_from(WORKERS), how=run_ends)
    def claim_and_end(self, worker: str, how: RunEnd) -> None:
        """A whole run in one step: the quick way to the backstop and to long journals."""
        before = len(self.runs)
        self.claim(worker, 1)
        if len(self.runs) > before:
            self.finish([(self.runs.pop(), how)])

    def finish(self, batch: list[tuple[InFlight, RunEnd]]) -> None:
        now = self.clock()
        by_worker: dict[str, list[tuple[InFlight, RunEnd]]] = {}
        for flight, how in batch:
            by_worker.setdefault(flight.worker, []).append((flight, how))
        for worker, mine in by_worker.items():
            expected = []
            for flight, _ in mine:
                job = self.model.jobs.get(flight.claimed.id)
                expected.append(job is not None and job.holds(worker, flight.claimed.run_count))
            settlements = [self.settlement(f.claimed, worker, how, now) for f, how in mine]
            assert store.settle(worker_id=worker, settlements=settlements) == expected
            for (flight, how), applied in zip(mine, expected, strict=True):
                if applied:
                    job = self.model.jobs[flight.claimed.id]
                    self.model.settle(job, flight.claimed.run_count, how.expected(job, now))

    @staticmethod
    def settlement(c: Claimed, worker: str, how: RunEnd, now: datetime) -> Settlement:
        if how.end == "release":
            run = Run(job_id=c.id, kind=c.kind, run_no=c.run_count, worker=worker)
            return released_settlement(run, now=now, note="worker shutting down")
        kinds = {"complete": "completed", "pause": "paused", "retry": "failed"}
        result = RunResult(
            job=c,
            end=kinds.get(how.end, how.end),  # type: ignore[arg-type]
            started_at=now,
            duration=timedelta(0),
            carry=dict(how.carry),
            value=how.value,
            note=f"run ended: {how.end}",
            resume_in=timedelta(seconds=how.resume_in),
        )
        return decide(result, policy=POLICY, worker_id=worker, now=now)

    @rule(seconds=st.sampled_from([1, 5, 20, 31, 90]))
    def advance_clock(self, seconds: int) -> None:
        self.offset += timedelta(seconds=seconds)

    @rule(seconds=st.sampled_from([31, 90]))
    def lease_runs_out_and_recovery_runs(self, seconds: int) -> None:
        """A worker's maintenance loop sweeps every second: time passing past a lease
        and the sweep that follows, in one step."""
        self.advance_clock(seconds)
        self.recover()

    @rule()
    def recover(self) -> None:
        now = self.clock()
        expired = self.model.expired(now)
        assert store.recover_expired(policy_for=lambda kind: POLICY, now=now) == len(expired)
        for job in expired:
            ending = m.failed(job, now, None, outcome="stale-recovered")
            self.model.settle(job, job.run_count, ending)

    @rule(worker=st.sampled_from(WORKERS))
    def extend(self, worker: str) -> None:
        now = self.clock()
        mine = {f.claimed.id: f.claimed.run_count for f in self.runs if f.worker == worker}
        current = [
            self.model.jobs[i]
            for i, run_no in mine.items()
            if i in self.model.jobs and self.model.jobs[i].holds(worker, run_no)
        ]
        until = now + m.LEASE
        assert store.extend_leases(worker_id=worker, runs=mine, until=until) == len(current)
        for job in current:
            job.claim_expires_at = until

    # --- operators --------------------------------------------------------------------------

    @precondition(lambda self: self.ids)
    @rule(pick=st.integers(0, 100))
    def cancel(self, pick: int) -> None:
        job_id = self.ids[pick % len(self.ids)]
        job = self.model.jobs.get(job_id)
        expected = "JobNotFound" if job is None else self.model.cancel(job)
        assert self.outcome_of(lambda: django_jobqueue.cancel(job_id)) == expected

    @precondition(lambda self: self.ids)
    @rule(pick=st.integers(0, 100), force=st.booleans())
    def requeue(self, pick: int, force: bool) -> None:
        job_id = self.ids[pick % len(self.ids)]
        job = self.model.jobs.get(job_id)
        got = self.outcome_of(lambda: django_jobqueue.requeue(job_id, force=force))
        expected = (
            "JobNotFound"
            if job is None
            else self.model.requeue(job, force=force, now=timezone.now())
        )
        assert got == expected

    @staticmethod
    def outcome_of(operation: Any) -> str | None:
        try:
            operation()
        except (InvalidTransition, JobNotFound) as exc:
            return type(exc).__name__
        return None

    @rule(
        kind=st.sampled_from([None, PLAIN, SYNC]),
        statuses=st.sampled_from([m.TERMINAL, ("completed",), ("dead", "cancelled")]),
        dry_run=st.booleans(),
    )
    def cleanup(self, kind: str | None, statuses: tuple[str, ...], dry_run: bool) -> None:
        # Every finished job finished before the controllable clock's now.
        before = self.clock() + timedelta(microseconds=1)
        count = django_jobqueue.cleanup(before, kind=kind, status=list(statuses), dry_run=dry_run)
        assert count == self.model.cleanup(kind=kind, statuses=statuses, dry_run=dry_run)

    # --- the database and the model agree ------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        rows = {j.id: j for j in Job.objects.only(*COMPARED, "kind", "visible_at", "finished_at")}
        assert set(rows) == set(self.model.jobs)
        entries: dict[uuid.UUID, list[tuple[str, int]]] = {}
        for job_id, outcome, run_no in JournalEntry.objects.order_by("id").values_list(
            "job_id", "outcome", "run_no"
        ):
            entries.setdefault(job_id, []).append((outcome, run_no))
        for job_id, job in self.model.jobs.items():
            compare(rows[job_id], job, entries.get(job_id, []))
        counts = Counter(j.status for j in self.model.jobs.values())
        assert Counter(j.status for j in rows.values()) == counts


COMPARED = (
    "status",
    "run_count",
    "failure_count",
    "carry",
    "result",
    "payload",
    "priority",
    "claimed_by",
    "claim_expires_at",
    "cancel_requested",
    "idempotency_key",
    "dedup_key",
)


def compare(row: Job, job: m.MJob, journal: list[tuple[str, int]]) -> None:
    """One row against its model; the first difference fails with both sides."""
    got = {name: getattr(row, name) for name in COMPARED}
    want = {name: getattr(job, name) for name in COMPARED}
    got["journal"], want["journal"] = journal, job.journal
    if job.exact:
        got["visible_at"], want["visible_at"] = row.visible_at, job.visible_at
    else:
        assert row.visible_at <= job.visible_at
    assert got == want, f"job {row.id} ({row.kind})"
    assert (row.finished_at is not None) == (job.status in m.TERMINAL)


# Shrinking a failure replays many examples against the database: give it time to report.
@pytest.mark.timeout(1200)
def test_the_store_follows_the_lifecycle_model() -> None:
    profile = settings.get_profile("lifecycle-ci")
    run_state_machine_as_test(
        LifecycleMachine,
        settings=settings(
            profile,
            max_examples=int(os.environ.get("MODEL_EXAMPLES", profile.max_examples)),
            stateful_step_count=int(os.environ.get("MODEL_STEPS", profile.stateful_step_count)),
        ),
    )
