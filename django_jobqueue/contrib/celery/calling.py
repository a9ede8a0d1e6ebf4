"""A Celery call's options (``countdown``, ``eta``, ``expires``, ``queue``,
``priority``, ``headers``, routing) as our enqueue request.

Celery's priorities are 0–9, 0 first (as on its Redis transport): 0–3 become our
``HIGH`` tier, 4–6 ``NORMAL`` and 7–9 ``LOW``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django_jobqueue.contrib.celery.config import route
from django_jobqueue.contrib.celery.exceptions import Unsupported
from django_jobqueue.errors import InvalidOption
from django_jobqueue.states import Priority

if TYPE_CHECKING:
    from django_jobqueue.store import EnqueueRequest

# Call options that map (``link`` is the canvas's), and those refused with why.
CALL_OPTIONS = frozenset(
    {"countdown", "eta", "expires", "queue", "priority", "headers", "ignore_result",
     "link", "routing_key", "retry", "retry_policy", "time_limit", "soft_time_limit"}
)  # fmt: skip
CALL_UNSUPPORTED = {
    "task_id": "job ids are chosen when the job is written; use the returned result's id "
    "(or .using(idempotency_key=...) of django_jobqueue's API to enqueue once)",
    "link_error": "an error callback: chain a step after it with a Workflow step "
    "when='finished' and read ctx.parents, or use a Batch's on_failure",
    "serializer": "payloads are JSON, never pickle",
    "exchange": "there is no broker; route with queue=",
    "connection": "there is no broker connection",
    "producer": "there is no broker producer",
    "add_to_parent": "results are not linked to a calling task",
    "shadow": "the job's kind is the task's name",
    "compression": "payloads are JSON rows",
}


def check_call(name: str, options: dict[str, Any]) -> None:
    for option in sorted(options):
        if option in CALL_UNSUPPORTED:
            raise Unsupported(
                f"{name}.apply_async({option}=...) is not supported: {CALL_UNSUPPORTED[option]}",
                option=option,
            )
        if option not in CALL_OPTIONS:
            raise InvalidOption(
                f"{name}.apply_async(): unknown option {option!r}; those that map: "
                + ", ".join(sorted(CALL_OPTIONS)),
                option=option,
            )


def tier(priority: Any, *, name: str) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 9:
        raise InvalidOption(f"{name}: priority must be 0-9 as in Celery, got {priority!r}",
                            option="priority")  # fmt: skip
    if priority <= 3:
        return Priority.HIGH
    return Priority.NORMAL if priority <= 6 else Priority.LOW


def _moment(value: Any, *, name: str, option: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)  # Celery: naive is UTC
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.now(UTC) + timedelta(seconds=value)
    raise InvalidOption(f"{name}: {option} must be a datetime or seconds, got {value!r}",
                        option=option)  # fmt: skip


def meta_of(task: Any, options: dict[str, Any]) -> dict[str, Any]:
    """What a call keeps in its payload beside the arguments: ``expires``, ``headers``."""
    meta: dict[str, Any] = {}
    expires = options.get("expires", task.expires)
    if expires is not None:
        meta["expires"] = _moment(expires, name=task.name, option="expires").isoformat()
    if options.get("headers"):
        meta["headers"] = dict(options["headers"])
    return meta


def request_for(
    task: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    options: dict[str, Any],
    meta: dict[str, Any],
) -> EnqueueRequest:
    """The enqueue request of one call; ``meta`` (parents, expires, headers) goes into the
    payload beside the arguments, which ``meta["parents"]`` says come after a parent's."""
    from django_jobqueue.task.options import Options, build_request, encode_payload

    defn = task.definition
    name = task.name
    check_call(name, options)
    defn.check(args, kwargs, parent=bool(meta.get("parents")))
    payload: dict[str, Any] = {"args": args, "kwargs": kwargs}
    if meta:
        payload["celery"] = meta
    conf = task.owner.conf
    routed = route(conf, name)
    queue = (
        options.get("queue")
        or routed.get("queue")
        or task.queue
        or conf["task_default_queue"]
        or "default"
    )
    priority = next(
        (
            p
            for p in (options.get("priority"), routed.get("priority"), task.priority)
            if p is not None
        ),
        conf["task_default_priority"],
    )
    given: dict[str, Any] = {"queue": queue}
    if priority is not None:
        given["priority"] = tier(priority, name=name)
    if options.get("countdown") is not None:
        given["delay"] = timedelta(seconds=options["countdown"])
    if options.get("eta") is not None:
        given["run_at"] = _moment(options["eta"], name=name, option="eta")
    return build_request(
        defn, payload, Options.build(**given), payload_json=encode_payload(payload, kind=name)
    )
