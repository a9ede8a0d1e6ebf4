"""Enqueue options (``.using(...)``), payload encoding and the storage request they
build, with a class task's merge decision handed over as a callable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from django_jobqueue import conf, store, validation
from django_jobqueue.errors import InvalidOption, InvalidPayload, MergeError
from django_jobqueue.rules.lifecycle import clamped
from django_jobqueue.store import EnqueueRequest
from django_jobqueue.store.dialects import for_alias
from django_jobqueue.task import limiting
from django_jobqueue.task.merge import Merge, Mergeable, Pending
from django_jobqueue.task.registry import TaskDef, registry, validate_priority, validate_queue

if TYPE_CHECKING:
    from django_jobqueue.models import Job
    from django_jobqueue.store import EnqueueRequest, MergePlan


def depth_limit(*, own_level: bool = False) -> tuple[int, str]:
    """How many levels a stored value may nest, and the name of that limit: the
    ``MAX_JSON_DEPTH`` setting, or less where the database's JSON columns hold less
    (MariaDB: 31 levels in all, the payload's or carry's own object, ``own_level``,
    being one of them)."""

    settings = conf.get()
    return _depth_limit(settings.max_json_depth, settings.database, own_level)


@lru_cache(maxsize=64)
def _depth_limit(setting: int, alias: str, own_level: bool) -> tuple[int, str]:
    """``depth_limit`` for one setting and database: asked for every payload (a bulk
    enqueue's 50,000 paid 5 µs each to find the same answer)."""
    cap = for_alias(alias).json_depth_cap()
    if cap is not None and cap[0] - own_level < setting:
        return cap[0] - own_level, f"the most {cap[1]} hold"
    return setting, "MAX_JSON_DEPTH"


def check_json(name: str, value: Any, *, kind: str) -> None:
    """Raise InvalidPayload naming ``name`` (and the path inside it) unless ``value`` can
    be stored as JSON."""
    depth, limit_name = depth_limit(own_level=True)
    try:
        validation.dumps(value, max_depth=depth, limit_name=limit_name)
    except validation.Unstorable as exc:
        raise InvalidPayload(
            f"{kind}: argument {name!r} cannot be stored: {name}{exc.path} {exc.problem}",
            kind=kind,
            argument=name,
        ) from None
    except (TypeError, ValueError) as exc:
        raise unsupported(name, value, kind=kind, problem=str(exc)) from None


def unsupported(
    name: str,
    value: Any,
    *,
    kind: str,
    problem: str,
    refused: Callable[[Any], bool] = validation.not_json,
    containers: tuple[type, ...] = (dict, list, tuple),
    word: Callable[[Any], str] = lambda part: "type",
) -> InvalidPayload:
    """The error for an argument JSON cannot hold, naming where in it the first part of
    a type it refuses is, in the words Django's own check uses ("Unsupported type:
    <class '…'>"), so tests written against Django's backends match ours."""
    found = validation.first_refused(value, refused, containers=containers)
    if found is not None:
        steps, part = found
        problem = f"Unsupported {word(part)}: {type(part)} at {name}{validation.short_path(steps)}"
    return InvalidPayload(
        f"{kind}: argument {name!r} is not JSON-serialisable ({problem})",
        kind=kind,
        argument=name,
    )


def encode_payload(payload: dict[str, Any], *, kind: str) -> str:
    """The payload as JSON text, encoded once; a value that cannot be is named, and so
    is a payload over ``MAX_PAYLOAD_BYTES`` (or nested deeper than ``MAX_JSON_DEPTH``,
    the payload's own object not counted)."""
    return payload_encoder(kind)(payload)


def payload_encoder(kind: str) -> Callable[[dict[str, Any]], str]:
    """``encode_payload`` for ``kind`` with the settings it checks against read once:
    a bulk enqueue encodes each of its items with one (the same checks, the limits not
    looked up again for every item)."""
    depth, limit_name = depth_limit(own_level=True)
    limit = conf.get().max_payload_bytes
    dumps = validation.dumps

    def encode(payload: dict[str, Any]) -> str:
        try:
            text = dumps(payload, max_depth=depth, own_level=True, limit_name=limit_name)
        except (TypeError, ValueError) as exc:
            for name, value in payload.items():
                check_json(name, value, kind=kind)
            raise InvalidPayload(
                f"{kind}: the payload cannot be stored ({exc})", kind=kind
            ) from None
        if len(text) > limit:  # ASCII: JSON escapes everything else
            raise InvalidPayload(
                f"{kind}: the payload is {len(text):,} bytes of JSON, over MAX_PAYLOAD_BYTES "
                f"({limit:,})",
                kind=kind,
            )
        return text

    return encode


def validate_key(name: str, value: Any) -> str | None:
    """An idempotency or dedup key: None, or a string that fits its column."""
    return validation.bounded_text(
        value, name=name, error=partial(InvalidOption, option=name), max_length=255, allow_none=True
    )


@dataclass(frozen=True)
class Options:
    """Per-enqueue overrides set with ``.using(...)``."""

    priority: int | None = None
    queue: str | None = None
    delay: timedelta | None = None
    run_at: datetime | None = None
    idempotency_key: str | None = None
    key: str | None = None  # the job's key (per-key limits, fairness)
    dedup_key: str | None = None  # merge into a pending job of the same kind and key
    debounce: timedelta | None = None  # each merge pushes the run to this after it
    max_wait: timedelta | None = None  # ... but never past this after the first enqueue
    # A sibling of the same dedup key already running: "drop" merges into it, "wait"
    # runs after it (one at a time); None: the new job may run beside it.
    while_running: str | None = None

    @classmethod
    def build(cls, base: Options | None = None, **given: Any) -> Options:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise InvalidOption(
                f"Unknown enqueue option(s): {', '.join(unknown)}. "
                f"Known: {', '.join(sorted(known))}",
                option=unknown[0],
            )
        values = {**dataclasses.asdict(base or cls()), **given}
        if values["priority"] is not None:
            values["priority"] = validate_priority(values["priority"])
        if values["queue"] is not None:
            validate_queue(values["queue"])
        if values["delay"] is not None:
            values["delay"] = validation.duration(
                values["delay"], name="delay", error=partial(InvalidOption, option="delay")
            )
        run_at = values["run_at"]
        if run_at is not None:
            if not isinstance(run_at, datetime) or run_at.tzinfo is None:
                raise InvalidOption(
                    f"run_at must be a timezone-aware datetime, got {run_at!r}", option="run_at"
                )
            if values["delay"] is not None and "delay" in given and "run_at" in given:
                raise InvalidOption("give delay or run_at, not both", option="run_at")
            values["run_at"] = clamped(run_at)  # a "never" date waits until LATEST
        for name in ("idempotency_key", "key", "dedup_key"):
            values[name] = validate_key(name, values[name])
        _debounce(values, given)
        mode = values["while_running"]
        if mode is not None and mode not in WHILE_RUNNING:
            raise InvalidOption(
                f"while_running must be one of {', '.join(map(repr, WHILE_RUNNING))}, got {mode!r}",
                option="while_running",
            )
        return cls(**values)


# What an enqueue does when a sibling (same kind and dedup key) is running.
WHILE_RUNNING = ("drop", "wait")


def _debounce(values: dict[str, Any], given: dict[str, Any]) -> None:
    """Check ``debounce`` and ``max_wait`` in ``values`` (in place)."""
    for name in ("debounce", "max_wait"):
        if values[name] is not None:
            values[name] = validation.duration(
                values[name], name=name, error=partial(InvalidOption, option=name), allow_zero=False
            )
    debounce, max_wait = values["debounce"], values["max_wait"]
    if max_wait is not None and debounce is None:
        raise InvalidOption(
            "max_wait needs a debounce (it caps how far one pushes)", option="max_wait"
        )
    if debounce is None:
        return
    if max_wait is not None and max_wait < debounce:
        raise InvalidOption(
            f"max_wait ({max_wait}) must be at least the debounce ({debounce})", option="max_wait"
        )
    if values["delay"] is not None or values["run_at"] is not None:
        raise InvalidOption(
            "give debounce or delay/run_at, not both: a debounce sets when the job runs",
            option="debounce",
        )


def job_key(defn: TaskDef, payload: dict[str, Any], options: Options) -> str | None:
    """The job's key: the enqueue's ``.using(key=...)``, else the task's ``key`` callable
    of the arguments, checked as any key (a string of at most 255 characters, or None)."""
    if options.key is not None or defn.key is None:
        return options.key
    try:
        value = defn.key(**payload)
    except Exception as exc:
        raise InvalidOption(
            f"{defn.kind}: its key callable raised {type(exc).__name__}: {exc}",
            kind=defn.kind,
            option="key",
        ) from exc
    return validation.bounded_text(
        value,
        name=f"{defn.kind}: the key its key callable returned",
        error=partial(InvalidOption, option="key", kind=defn.kind),
        max_length=255,
        allow_none=True,
    )


def build_request(
    defn: TaskDef,
    payload: dict[str, Any],
    options: Options,
    task: Mergeable | None = None,
    payload_json: str | None = None,
    *,
    keyed: bool = True,
) -> EnqueueRequest:
    """The storage layer's request for one job; a class task with a dedup key brings
    its merge decision along as a callable. ``keyed`` False: the key is not computed
    from ``payload`` (a bulk enqueue's template, each item computing its own)."""

    registry.warn_if_unseen(defn)
    dedup_key = options.dedup_key
    if task is not None and dedup_key is None:
        dedup_key = validate_key("dedup_key()", task.dedup_key())
    if options.debounce is not None and dedup_key is None:
        raise InvalidOption(
            f"{defn.kind}: debounce needs a dedup_key (the jobs it merges)", option="debounce"
        )
    if options.while_running is not None and dedup_key is None:
        raise InvalidOption(
            f"{defn.kind}: while_running needs a dedup_key (the siblings it looks for)",
            option="while_running",
        )
    merge: Callable[[Job], MergePlan | None] | None = None
    if dedup_key is not None:  # a class task decides; a function task keeps the pending job
        merge = _merger(task, payload) if task is not None else _keep
    key = job_key(defn, payload, options) if keyed else options.key
    if options.while_running == "wait":
        assert dedup_key is not None
        key = waiting_key(defn, key, dedup_key)
    return EnqueueRequest(
        kind=defn.kind,
        payload=payload,
        queue=options.queue or defn.queue,
        priority=defn.priority if options.priority is None else options.priority,
        delay=options.delay,
        run_at=options.run_at,
        idempotency_key=options.idempotency_key,
        dedup_key=dedup_key,
        merge=merge,
        payload_json=payload_json,
        rate=limiting.rate_for(defn.kind, defn.rate_limit),
        job_key=key,
        rate_per_key=limiting.rate_per_key_for(defn.kind, defn.rate_limit_per_key),
        debounce=options.debounce,
        max_wait=options.max_wait,
        while_running=options.while_running,
    )


def waiting_key(defn: TaskDef, key: str | None, dedup_key: str) -> str:
    """The key of a ``while_running="wait"`` job: its dedup key, which the kind's per-key
    limit of one then holds to one running job (a different key would count elsewhere)."""
    kind = defn.kind
    if key is not None and key != dedup_key:
        raise InvalidOption(
            f"{kind}: while_running='wait' keys the job by its dedup_key ({dedup_key!r}); "
            f"its key is {key!r}: give the same key, or none",
            option="while_running",
            kind=kind,
        )
    rule = limiting.resolve(kind).rule()
    if rule is None or rule.per_key != 1:
        has = "no limit per key" if rule is None or rule.per_key is None else f"{rule.per_key}"
        raise InvalidOption(
            f"{kind}: while_running='wait' needs the kind to run one job of a key at a time "
            f"(max_in_flight_per_key=1 or ordered=True); its most per key is {has}",
            option="while_running",
            kind=kind,
        )
    return dedup_key


def _keep(candidate: Job) -> MergePlan:
    """A function task's merge: the pending job stays as it is (a debounce moves it)."""

    return store.MergePlan("keep")


def _merger(task: Mergeable, payload: dict[str, Any]) -> Callable[[Job], MergePlan | None]:
    """How ``task`` merges into a pending candidate row: the task's own ``merge()``,
    checked, as a plan for the storage layer (None: insert independently)."""

    def decide(candidate: Job) -> MergePlan | None:
        kind = task.kind
        try:
            existing = registry.get(kind).instance(candidate.payload)
        except Exception as exc:
            raise MergeError(
                f"{kind}: pending job {candidate.id} has a payload the task no longer "
                f"accepts ({exc})",
                kind=kind,
                job_id=candidate.id,
            ) from exc
        assert existing is not None
        pending = Pending(
            job_id=candidate.id,
            task=existing,
            # A stored carry that cannot be decoded (raw SQL) is none to merge() too.
            carry=dict(candidate.carry) if isinstance(candidate.carry, dict) else {},
            run_count=candidate.run_count,
            priority=candidate.priority,
            journal=store.journal(job_id=candidate.id),
        )
        try:
            decision = task.merge(pending)
        except Exception as exc:
            raise MergeError(
                f"{kind}.merge() raised {type(exc).__name__}: {exc}", kind=kind
            ) from exc
        if not isinstance(decision, Merge):
            raise MergeError(
                f"{kind}.merge() must return a Merge decision, got {decision!r}", kind=kind
            )
        if decision.action == "independent":
            return None
        if decision.action == "keep":
            return store.MergePlan("keep")
        if decision.action == "replace":
            return store.MergePlan("replace", payload=payload)
        return _merged_with(task, decision)

    return decide


def _merged_with(task: Mergeable, decision: Merge) -> MergePlan:
    """The plan for ``Merge.with_()``: its task and carry checked as an enqueue's are."""

    kind = task.kind
    new = decision.task
    if not isinstance(new, type(task)) or new.kind != kind:
        raise MergeError(f"{kind}: Merge.with_() needs a {kind} task, got {new!r}", kind=kind)
    depth, limit_name = depth_limit(own_level=True)
    problem = (
        None
        if decision.carry is None
        else validation.json_problem(
            decision.carry, max_depth=depth, own_level=True, limit_name=limit_name
        )
    )
    if problem is not None:
        raise MergeError(
            f"{kind}.merge() returned a carry that is not JSON-serialisable ({problem})",
            kind=kind,
        )
    merged = new.to_payload()
    encode_payload(merged, kind=kind)  # checked as any payload is (depth, size)
    return store.MergePlan("with", payload=merged, carry=decision.carry)
