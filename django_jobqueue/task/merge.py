"""Merge decisions: what to do with an incoming job whose dedup key matches a pending one,
the ``Pending`` view of that job a task's ``merge()`` sees, and ``Mergeable``, what a
merge needs of a task instance.

The lowest module of the task package: the registry, the options and the handles
type against ``Mergeable`` rather than import ``Task`` from ``definition``, which
imports them (a type-only import back would close a circle).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

if TYPE_CHECKING:
    from django_jobqueue.models import JournalEntry


MergeAction = Literal["keep", "replace", "with", "independent"]


class Mergeable(Protocol):
    """What a merge reads of a class task's instance (every ``Task`` is one)."""

    @property
    def kind(self) -> str: ...

    def dedup_key(self) -> str | None: ...

    def merge(self, existing: Pending) -> Merge: ...

    def to_payload(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Pending:
    """The pending job an incoming task may merge with."""

    job_id: uuid.UUID
    task: Mergeable
    carry: dict[str, Any]
    run_count: int
    priority: int
    journal: Sequence[JournalEntry] = field(default_factory=list)


@dataclass(frozen=True)
class Merge:
    """What to do with an incoming task whose dedup key matches a pending job."""

    action: MergeAction
    task: Mergeable | None = None
    carry: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.action not in get_args(MergeAction):
            raise ValueError(
                f"Merge action must be one of {', '.join(get_args(MergeAction))}, got "
                f"{self.action!r}: build one with Merge.keep(), replace(), with_() or independent()"
            )

    @classmethod
    def keep(cls) -> Merge:
        """Keep the pending job as it is; drop the incoming task."""
        return cls("keep")

    @classmethod
    def replace(cls) -> Merge:
        """Overwrite the pending job's payload with the incoming task's; carry starts afresh."""
        return cls("replace")

    @classmethod
    def with_(cls, task: Mergeable, *, carry: dict[str, Any] | None = None) -> Merge:
        """Give the pending job a computed payload (and carry, if given)."""
        return cls("with", task=task, carry=carry)

    @classmethod
    def independent(cls) -> Merge:
        """Do not merge: insert the incoming task as a job of its own."""
        return cls("independent")
