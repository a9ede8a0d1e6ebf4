"""The conformance matrix's workers: each takes its turns as ``worker.loop.Worker`` does
(its claim built by ``worker.claiming.claim_request`` from the limits in force, read
as the worker reads them, sent with its settlements to ``store.exchange``) and runs a
claimed job's code through the run pipeline, as a slot does; no thread, no clock: a
cell says when each turn happens.

A worker that makes its claims ready (``ready_room``) does as an idle worker does
before its wait (``worker.turn.Turns._make_ready``): with nothing running, it prepares
the claim of its next turn then, and sends that claim (``store.claim_ready``) at the
turn, whatever has happened since, unless the turn settles something (the loop drops
it then and builds its own)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django_jobqueue import conf, store
from django_jobqueue.models import Job
from django_jobqueue.rules.lifecycle import Settlement
from django_jobqueue.run.connguard import ThreadConnections
from django_jobqueue.run.pipeline import Pipeline
from django_jobqueue.task import limiting
from django_jobqueue.task.registry import registry
from django_jobqueue.worker.claiming import KeyCursor, claim_request
from django_jobqueue.worker.services.base import Running
from tests.taskapp import matrix_tasks

SUBJECT = matrix_tasks.subject.kind
PARENT = matrix_tasks.parent.kind


@dataclass
class MatrixWorker:
    """One worker of a cell: its id, the kinds it serves, its runs in flight (what its
    caps count) and its claim slot number (what its priority floors follow)."""

    worker_id: str
    kinds: Sequence[str] = (SUBJECT, PARENT)
    slot: int = 0
    running: dict[uuid.UUID, Running] = field(default_factory=dict)
    keys: KeyCursor = field(default_factory=KeyCursor)  # its per-key cursor, as a worker's
    ready_room: int = 0  # the room of the claims it makes ready (0: it does not)
    made: tuple[store.ClaimRequest, store.PreparedClaim] | None = None  # made ready, unsent
    sent_ready: int = 0  # how many of its turns sent a claim made ready

    def __post_init__(self) -> None:
        self.pipe = Pipeline(
            worker_id=self.worker_id,
            alias=conf.get().database,
            max_output_bytes=conf.get().max_output_bytes,
        )

    def turn(self, room: int, settle: Sequence[Settlement] = ()) -> list[uuid.UUID]:
        """Settle ``settle`` and claim up to ``room`` jobs in one turn (``room`` 0: settle
        only, the ordinary settlement path); returns the ids claimed, in claim order. A
        claim made ready is sent instead when the turn settles nothing and claims for the
        room it was made for."""
        made, self.made = self.made, None
        if made is not None and not settle and not self.running and room == self.ready_room:
            request, prepared = made
            applied, claimed = [], store.claim_ready(prepared)
            self.sent_ready += 1
        else:
            request = self.wanted(room)
            applied, claimed = store.exchange(
                worker_id=self.worker_id, settlements=list(settle), request=request
            )
        self.keys.served(claimed, request.per_key if request is not None else ())
        assert list(applied) == [True] * len(settle), f"{self.worker_id}: a settlement refused"
        for s in settle:
            del self.running[s.job_id]
        self.slot += len(claimed)
        for job in claimed:
            ctx = self.pipe.context(job)
            lease = timedelta(minutes=1)
            self.running[job.id] = Running(job, ctx, lease, job.claim_expires_at)
        self.idle()
        return [job.id for job in claimed]

    def idle(self) -> None:
        """About to wait: a worker that makes its claims ready, with nothing running,
        prepares its next turn's claim now (the limits in force read now)."""
        if self.ready_room <= 0 or self.running:
            return
        request = self.wanted(self.ready_room)
        assert request is not None
        prepared = store.ready_claim(worker_id=self.worker_id, request=request)
        self.made = None if prepared is None else (request, prepared)

    def wanted(self, room: int) -> store.ClaimRequest | None:
        """The claim the worker would make for ``room`` free slots (None: settle only),
        the limits in force read now (a worker reads them every 2 s; a cell changes them
        between turns)."""
        if room <= 0:
            return None
        settings = conf.get()
        most, rules = limiting.claim_limits(self.kinds, max_age=0)
        return claim_request(
            room,
            running=self.running,
            caps=dict(settings.kind_concurrency),
            max_in_flight=most,
            per_key=rules,
            key_after=self.keys.after(),
            slot=self.slot,
            priority_ratio=settings.priority_ratio,
            kinds=list(self.kinds),
            queues=(),
            leases=registry.leases(),
        )

    def run(self, job_id: uuid.UUID) -> Settlement | None:
        """Run one of this worker's claimed jobs' code, as a slot does: its settlement,
        for the worker's next turn to write, or None when the run wrote its own (a
        durable sleep or wait parks the job with its steps' record)."""
        running = self.running[job_id]
        with ThreadConnections() as guard:
            ended = self.pipe.run_one(running.job, running.ctx, guard)
        settlement = self.pipe.to_write(ended)
        if settlement is None:
            del self.running[job_id]
        return settlement

    def finish(self, job_id: uuid.UUID, room: int = 0) -> list[uuid.UUID]:
        """Run a claimed job and settle it in a turn claiming up to ``room``."""
        settlement = self.run(job_id)
        if settlement is None:
            return self.turn(room) if room > 0 else []
        return self.turn(room, settle=[settlement])


def status(job_id: uuid.UUID | None) -> str:
    assert job_id is not None, "no such job in this cell"
    return str(Job.objects.values_list("status", flat=True).get(id=job_id))


def claimed_by(job_id: uuid.UUID | None) -> str | None:
    assert job_id is not None, "no such job in this cell"
    row = Job.objects.values_list("status", "claimed_by").get(id=job_id)
    return row[1] if row[0] == "claimed" else None
