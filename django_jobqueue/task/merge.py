"""Merge decisions: what to do with an incoming job whose dedup key matches a pending one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from django_jobqueue.task.definition import Task


MergeAction = Literal["keep", "replace", "with", "independent"]


@dataclass(frozen=True)
class Merge:
    """What to do with an incoming task whose dedup key matches a pending job."""

    action: MergeAction
    task: Task | None = None
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
    def with_(cls, task: Task, *, carry: dict[str, Any] | None = None) -> Merge:
        """Give the pending job a computed payload (and carry, if given)."""
        return cls("with", task=task, carry=carry)

    @classmethod
    def independent(cls) -> Merge:
        """Do not merge: insert the incoming task as a job of its own."""
        return cls("independent")
