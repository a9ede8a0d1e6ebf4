"""What a finished parent does to a waiting child, as values (pure, like ``lifecycle``).

The storage layer reads the child's counters under its row lock, asks ``join`` what
they become, and writes the answer in the parent's settlement transaction: a join is a
counter per child, never a scan of its siblings, so it costs the same per parent
whatever the fan-in, and it is decided once because the settlement is.
"""

from __future__ import annotations

from dataclasses import dataclass

from django_jobqueue.states import JoinWhen, Status, WorkflowStatus


@dataclass(frozen=True, slots=True)
class Join:
    """A waiting child after some of its parents finished: its counters and status."""

    parents_open: int
    parents_dead: int
    status: str  # waiting (parents still open), pending (released) or cancelled


def join(*, when: str, parents_open: int, parents_dead: int, completed: int, failed: int) -> Join:
    """A child's counters once ``completed`` more parents completed and ``failed`` more
    ended dead or cancelled.

    ``completed`` (the default join): a failed parent cancels the child at once;
    ``finished``: any ending counts, the child runs once none is open; ``failed`` (a
    batch's ``on_failure``): runs once none is open if one failed, else is cancelled.
    """
    open_ = max(parents_open - completed - failed, 0)
    dead = parents_dead + failed
    if when == JoinWhen.COMPLETED and failed:
        return Join(open_, dead, Status.CANCELLED)
    if open_:
        return Join(open_, dead, Status.WAITING)
    if when == JoinWhen.FAILED and not dead:
        return Join(open_, dead, Status.CANCELLED)
    return Join(open_, dead, Status.PENDING)


def outcome(*, cancel_requested: bool, steps_dead: int) -> str:
    """A workflow's status once its last step is terminal: cancelled if an operator
    cancelled it, failed if a step died, else completed (a step a join cancelled, such
    as an ``on_failure`` callback after every member completed, fails nothing)."""
    if cancel_requested:
        return WorkflowStatus.CANCELLED
    if steps_dead:
        return WorkflowStatus.FAILED
    return WorkflowStatus.COMPLETED


# The note of a batch's on_failure callback cancelled because every member completed.
VOID_NOTE = "cancelled: every parent step finished and none died (an on_failure step)"


def cancel_note(parent_name: str, parent_id: object, parent_status: str, when: str) -> str:
    """The journal note of a child a finished parent cancelled, naming that parent."""
    if when == JoinWhen.FAILED:
        return VOID_NOTE
    return (
        f"cancelled: parent step {parent_name!r} ({parent_id}) ended {parent_status}, "
        f"and this step runs only after its parents completed (when={when!r})"
    )
