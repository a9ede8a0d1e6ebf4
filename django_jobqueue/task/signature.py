"""Signatures: a task and its arguments, validated and not yet enqueued.

``add.s(1, 2)`` or ``add.using(queue="io").s(x=1)`` binds and encodes the call exactly as
``enqueue`` does (the same ``encode`` and ``build_request``), so a signature that exists
is one the store can write: bad arguments fail where the signature is made, naming the
task. Workflows (``django_jobqueue.workflows``) compose signatures into steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django_jobqueue.errors import InvalidOption

if TYPE_CHECKING:
    from django_jobqueue.store import EnqueueRequest


@dataclass(frozen=True)
class Signature:
    """One call of a task: its validated enqueue request (kind, payload, options)."""

    request: EnqueueRequest

    @property
    def kind(self) -> str:
        return self.request.kind

    @property
    def payload(self) -> dict[str, Any]:
        return self.request.payload

    def __repr__(self) -> str:
        return f"<signature {self.kind} {self.payload!r}>"


def signature(request: EnqueueRequest) -> Signature:
    """The signature of a request; a step cannot carry an idempotency key or a dedup key
    (a step is one of its workflow's, never reused nor merged into another job)."""
    if request.idempotency_key is not None:
        raise InvalidOption(
            f"{request.kind}: a workflow step cannot have an idempotency_key (its workflow "
            "is the unit that is enqueued once)",
            option="idempotency_key",
            kind=request.kind,
        )
    if request.dedup_key is not None:
        raise InvalidOption(
            f"{request.kind}: a workflow step cannot merge by dedup_key()",
            option="dedup_key",
            kind=request.kind,
        )
    return Signature(request)
