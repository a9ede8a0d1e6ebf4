"""Why a job is not running, in one line: the answer of ``JobHandle.explain()``, the
admin's job page and jobs list, ``jobqueue show`` and ``jobqueue why``.

The reasons are asked in the order a job meets them on its way to a claim: a step
waits for its parents; a pending job may be parked (a durable sleep, an event wait) or
scheduled for later; then a claim must read its queue (not paused), a live worker must
serve it, its kind must have a free slot (``max_in_flight``), its key a free slot
(``max_in_flight_per_key``, ``ordered``) and, for an ``ordered`` kind, the job must be
its key's head; a ``fair`` kind serves the keys running fewer first; and last, the
runnable jobs ahead of it in claim order go first. The first that holds is the answer.

Every fact comes from the store's reads (``store.explaining``), which apply the claim's
own rules, and every limit from ``limiting.resolve``, which the workers' claims use:
nothing here restates a rule. Rate limits refuse enqueues and never hold a stored job,
so they are no reason here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from django.utils import timezone

from django_jobqueue import store
from django_jobqueue.formatting import fmt_age, plural
from django_jobqueue.models import (
    Job,
    JournalEntry,
    Outcome,
    QueuePause,
    Status,
    WorkerHeartbeat,
)
from django_jobqueue.redaction import redact_text
from django_jobqueue.store import explaining, graphs
from django_jobqueue.task import limiting
from django_jobqueue.task.registry import registry

# How many of a step's parents are named (the count says how many wait).
PARENTS_NAMED = 5


class Why(StrEnum):
    """The reason a job is where it is: each the first of the checks (the module's
    order) that holds for it."""

    RUNNING = "running"
    FINISHED = "finished"
    WAITING_ON_PARENTS = "waiting_on_parents"
    SLEEPING = "sleeping"
    WAITING_FOR_EVENT = "waiting_for_event"
    SCHEDULED = "scheduled"
    QUEUE_PAUSED = "queue_paused"
    NO_WORKER = "no_worker"
    KIND_AT_LIMIT = "kind_at_limit"
    KEY_AT_LIMIT = "key_at_limit"
    BEHIND_KEY_HEAD = "behind_key_head"
    FAIR_SHARE = "fair_share"
    BEHIND_OTHERS = "behind_others"
    NEXT = "next"


class Target(StrEnum):
    """Where the reason can be changed: a surface turns it into a page (the admin: the
    job, the dashboard's queues, limits or workers sections, the workflow)."""

    JOB = "job"
    QUEUE = "queue"
    LIMITS = "limits"
    WORKERS = "workers"
    WORKFLOW = "workflow"


class Action(StrEnum):
    """The operation that lifts the reason, where one does ("" for none)."""

    NONE = ""
    RESUME_QUEUE = "resume_queue"
    RUN_NOW = "run_now"
    RAISE_LIMIT = "raise_limit"
    REQUEUE = "requeue"


@dataclass(frozen=True)
class Explanation:
    """A job's reason: its ``code``, a one-line ``message``, the ``target`` page and its
    ``ref`` (a queue, a kind, a job or workflow id) where it can be changed, and the
    ``action`` that lifts it (``Action.NONE``: none does)."""

    code: Why
    message: str
    target: Target
    ref: str
    action: Action = Action.NONE

    def __str__(self) -> str:
        return self.message

    @property
    def blocking(self) -> bool:
        """Whether the job waits (False: it runs, has finished, or is next)."""
        return self.code not in (Why.RUNNING, Why.FINISHED, Why.NEXT)


def when(moment: datetime | None, now: datetime) -> str:
    """A moment as the messages say it: UTC to the second, and how far off it is."""
    if moment is None:
        return "-"
    text = moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    seconds = (moment - now).total_seconds()
    return f"{text} (in {fmt_age(seconds)})" if seconds > 0 else f"{text} ({fmt_age(-seconds)} ago)"


def explain(job: Job, *, now: datetime | None = None) -> Explanation:
    """Why ``job`` (as read) is where it is, now."""
    return Explainer(now=now).explain(job)


class Explainer:
    """Explains jobs at one moment, reading what several jobs share (the paused queues,
    the live workers, a kind's limits and claimed jobs) once.

    ``brief`` (a list of many jobs): no read whose cost grows with the table or the
    journal, that is no place in claim order (a runnable job is said to wait its turn)
    and no journal entry (a scheduled job is said to be scheduled; a waiting step, for
    how many parents): the job's own page says those."""

    def __init__(self, *, now: datetime | None = None, brief: bool = False) -> None:
        self.now = now or timezone.now()
        self.brief = brief
        self._pauses: dict[str, QueuePause] | None = None
        self._live: list[WorkerHeartbeat] | None = None
        self._limits: dict[str, limiting.KindLimits] = {}
        self._held: dict[tuple[str, str | None], explaining.Held] = {}

    def explain(self, job: Job) -> Explanation:
        now = self.now
        if job.status == Status.CLAIMED:
            stop = f"; asked to stop by {job.cancel_actor or '?'}" if job.cancel_requested else ""
            return Explanation(
                Why.RUNNING,
                f"running: run {job.run_count} on {job.claimed_by}, lease until "
                f"{when(job.claim_expires_at, now)}{stop}",
                Target.JOB,
                str(job.id),
            )
        if job.status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
            return self._finished(job)
        if job.status == Status.WAITING:
            return self._parents(job)
        return _parked(job, now) or self._scheduled(job) or self._claim(job)

    # --- what several jobs share, read once ---------------------------------------------

    def pause(self, queue: str) -> QueuePause | None:
        if self._pauses is None:
            self._pauses = {p.queue: p for p in store.paused_queues()}
        return self._pauses.get(queue)

    def serving(self, job: Job) -> list[str]:
        if self._live is None:
            self._live = explaining.live_workers(now=self.now)
        return explaining.serving_kinds(self._live, kind=job.kind, queue=job.queue)

    def limits(self, kind: str) -> limiting.KindLimits:
        if kind not in self._limits:
            self._limits[kind] = limiting.resolve(kind, max_age=0 if not self._limits else None)
        return self._limits[kind]

    def held(self, kind: str, key: str | None = None) -> explaining.Held:
        if (kind, key) not in self._held:
            self._held[(kind, key)] = explaining.held(kind=kind, key=key)
        return self._held[(kind, key)]

    # --- the reasons, in the order a job meets them -------------------------------------

    def _finished(self, job: Job) -> Explanation:
        said = f"{job.status} at {when(job.finished_at, self.now)}"
        if job.status == Status.DEAD:
            said = f"dead after {plural(job.failure_count, 'failure', 'failures')}"
            if not self.brief:
                last = _last_entry(job)
                error = _first_line(last.note) if last is not None else ""
                said += f": {error}" if error else ""
        elif job.status == Status.CANCELLED and job.cancel_actor:
            said += f" by {job.cancel_actor}"
        action = Action.NONE if store.requeue_refusal(job) else Action.REQUEUE
        return Explanation(Why.FINISHED, said, Target.JOB, str(job.id), action)

    def _parents(self, job: Job) -> Explanation:
        when_ = job.join_when or "completed"
        said = f"waiting on workflow parents: {job.parents_open} not yet {when_}"
        if not self.brief:
            parents = graphs.parents(job_id=job.id, limit=PARENTS_NAMED)
            named = ", ".join(f"{p.name or p.id} ({p.status})" for p in parents)
            total, _ = graphs.edge_counts(job_id=job.id)
            more = f" and {total - len(parents)} more" if total > len(parents) else ""
            said = (
                f"waiting on workflow parents: {job.parents_open} of {total} not yet "
                f"{when_}: {named}{more}"
            )
        return Explanation(Why.WAITING_ON_PARENTS, said, Target.WORKFLOW, str(job.workflow_id))

    def _scheduled(self, job: Job) -> Explanation | None:
        """A pending job not due yet, and what set its time (its latest journal entry)."""
        if job.visible_at <= self.now:
            return None
        said = f"scheduled for {when(job.visible_at, self.now)}"
        if not self.brief:
            last = _last_entry(job)
            said += f": {_set_by(job, last, self.now)}"
        return Explanation(Why.SCHEDULED, said, Target.JOB, str(job.id), Action.RUN_NOW)

    def _claim(self, job: Job) -> Explanation:
        """A due pending job: what a claim asks of it, in the claim's order."""
        now = self.now
        pause = self.pause(job.queue)
        if pause is not None:
            by = f" by {pause.paused_by}" if pause.paused_by else ""
            return Explanation(
                Why.QUEUE_PAUSED,
                f"queue {job.queue!r} paused{by} since {when(pause.paused_at, now)}",
                Target.QUEUE,
                job.queue,
                Action.RESUME_QUEUE,
            )
        kinds = self.serving(job)
        if not kinds:
            return Explanation(
                Why.NO_WORKER,
                f"no live worker runs kind {job.kind!r} in queue {job.queue!r} (no fresh "
                "heartbeat serves both): it waits until one starts",
                Target.WORKERS,
                job.kind,
            )
        limits = self.limits(job.kind)
        return (
            self._kind_limit(job, limits) or self._key_rules(job, limits) or self._place(job, kinds)
        )

    def _kind_limit(self, job: Job, limits: limiting.KindLimits) -> Explanation | None:
        """The kind's global ``max_in_flight``, full: the claim counts the kind's claimed
        jobs against it."""
        most = limits.max_in_flight
        if most is None:
            return None
        held = self.held(job.kind)
        if held.count < most:
            return None
        first = held.holders[0] if held.holders else None
        oldest = f"; first lease to end: {_holder(first, self.now)}" if first else ""
        return Explanation(
            Why.KIND_AT_LIMIT,
            f"kind {job.kind!r} at its limit: max_in_flight={most} (set in "
            f"{limits.max_in_flight_from}), {held.count} running{oldest}",
            Target.LIMITS,
            job.kind,
            Action.RAISE_LIMIT,
        )

    def _key_rules(self, job: Job, limits: limiting.KindLimits) -> Explanation | None:
        """The kind's per-key rule (``KeyRule``, as the claim gets it), for a keyed job."""
        rule = limits.rule()
        if rule is None or job.key is None:
            return None
        held = self.held(job.kind, job.key)
        most = rule.per_key
        if most is not None and held.count >= most:
            name = "ordered" if rule.ordered else "max_in_flight_per_key"
            first = held.holders[0] if held.holders else None
            oldest = f"; oldest holder: {_holder(first, self.now)}" if first else ""
            return Explanation(
                Why.KEY_AT_LIMIT,
                f"key {job.key!r} at its limit: {held.count} of {most} running ({name}, set "
                f"in {limits.per_key_from[name]}){oldest}",
                Target.LIMITS,
                job.kind,
                Action.RAISE_LIMIT,
            )
        if rule.ordered:
            return self._head(job, job.key)
        if rule.fair and held.count and not self.brief:  # the keys' turns: a read of many
            return self._turns(job, job.key, held.count)
        return None

    def _head(self, job: Job, key: str) -> Explanation | None:
        head = explaining.key_head(kind=job.kind, key=key)
        if head is None or head.id == job.id:
            return None
        due = "due" if head.visible_at <= self.now else f"due {when(head.visible_at, self.now)}"
        return Explanation(
            Why.BEHIND_KEY_HEAD,
            f"behind its key {key!r}'s head, job {head.id} ({head.status}, {due}): an "
            "ordered kind runs each key's jobs one at a time, in enqueue order",
            Target.JOB,
            str(head.id),
        )

    def _turns(self, job: Job, key: str, running: int) -> Explanation | None:
        turns = explaining.key_turns(kind=job.kind, key=key, running=running, now=self.now)
        if not turns.before:
            return None
        last = turns.last_finished
        served = f"its last job finished {when(last, self.now)}" if last else "none finished"
        return Explanation(
            Why.FAIR_SHARE,
            f"fair share: key {key!r} runs {running}; "
            f"{plural(turns.before, 'other key', 'other keys')} running fewer go first "
            f"({served})",
            Target.LIMITS,
            job.kind,
        )

    def _place(self, job: Job, kinds: list[str]) -> Explanation:
        """Its place in its queue's claim order, for the workers that serve it."""
        if self.brief:
            return Explanation(
                Why.BEHIND_OTHERS,
                f"pending: runnable, claimed in its turn in queue {job.queue!r}",
                Target.QUEUE,
                job.queue,
            )
        most, rules = limiting.claim_limits(kinds, max_age=None)
        claimed = store.in_flight(kinds=list(most))
        full = sorted(k for k, n in most.items() if claimed.get(k, 0) >= n)
        rule = rules.get(job.kind)
        key_most = rule.per_key if rule is not None else None
        place = explaining.position(
            job=job, kinds=kinds, now=self.now, full=full, key_most=key_most
        )
        if place.ahead:
            return Explanation(
                Why.BEHIND_OTHERS,
                f"pending: behind {place.ahead:,} claimable job{'s' if place.ahead != 1 else ''}"
                f" in queue {job.queue!r} ({place.higher:,} of higher priority), claimed in order",
                Target.QUEUE,
                job.queue,
            )
        return Explanation(
            Why.NEXT,
            f"pending: next in queue {job.queue!r}; a worker claims it on its next turn",
            Target.QUEUE,
            job.queue,
        )


def _parked(job: Job, now: datetime) -> Explanation | None:
    """A durable sleep or an event wait (the parking columns ``ctx.sleep`` and
    ``ctx.wait_for`` write), while it is not yet runnable (as ``parked_counts``: a
    sleep run now, or an event delivered, makes it runnable with its column kept)."""
    if job.visible_at <= now:
        return None
    if job.parked == "sleep":
        return Explanation(
            Why.SLEEPING,
            f"sleeping (ctx.sleep) until {when(job.wake_at or job.visible_at, now)}",
            Target.JOB,
            str(job.id),
            Action.RUN_NOW,
        )
    if job.parked == "event":
        key = f" key {job.wait_key!r}" if job.wait_key else ""
        until = f"until {when(job.wake_at, now)}" if job.wake_at else "with no timeout"
        return Explanation(
            Why.WAITING_FOR_EVENT,
            f"waiting for event {job.wait_name!r}{key} (ctx.wait_for), {until}",
            Target.JOB,
            str(job.id),
        )
    return None


def _set_by(job: Job, last: JournalEntry | None, now: datetime) -> str:
    """What set a scheduled job's time, from its latest journal entry."""
    outcome = last.outcome if last is not None else ""
    if last is not None and outcome == Outcome.RETRIED:
        defn = registry.find(job.kind)
        most = defn.max_failures if defn is not None else None
        of = f" of {most - 1}" if isinstance(most, int) else ""
        return f"retry {job.failure_count}{of} after {_first_line(last.note) or 'an error'}"
    if last is not None and outcome == Outcome.STALE_RECOVERED:
        return f"retry {job.failure_count} after its worker was lost ({_first_line(last.note)})"
    if last is not None and outcome == Outcome.PAUSED:
        return f"its task paused (raise Pause): {_first_line(last.note) or 'no note'}"
    if last is not None and outcome == Outcome.MERGED and "debounced" in last.note:
        return f"debounce window: a merge {when(last.recorded_at, now)} moved it later"
    if job.dedup_key is not None:
        return f"set at enqueue (run_at, delay, or a debounce of dedup key {job.dedup_key!r})"
    return "set at enqueue (run_at or delay)"


def _last_entry(job: Job) -> JournalEntry | None:
    found = store.journal(job_id=job.id, last=1, since=job.created_at)
    return found[-1] if found else None


def _first_line(note: str) -> str:
    """A note's first non-blank line, redacted (an error's class and message)."""
    for line in note.splitlines():
        if line.strip():
            return redact_text(line.strip())
    return ""


def _holder(h: explaining.Holder, now: datetime) -> str:
    return f"job {h.id} on {h.claimed_by or '?'} (lease until {when(h.lease_until, now)})"


__all__ = ["Action", "Explainer", "Explanation", "Target", "Why", "explain", "when"]
