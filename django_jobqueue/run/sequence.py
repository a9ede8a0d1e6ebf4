"""Where each durable step was recorded, and the check that a replay meets the same
sequence: a step's identity is its name, its order and its ``version=``.

Each step, sleep and wait record keeps ``seq`` (its position among the run's steps,
sleeps and waits, from 0) and, when the task gave one, ``version``. A replay counts its
own calls the same way and compares: a recorded step met at another position or with
another version, or a new step met where the job recorded a different one, is a
``StepDivergence`` (a deploy reordered, renamed, inserted or removed steps while the
job was in flight). Running on would hand one step's record to another, or run a side
effect again that was recorded under another name.

Records written before fingerprints existed have no ``seq``: unversioned, never
checked (nothing says where they were recorded), as before. Patch decisions
(``ctx.patched``) are records too, found by their change id, and take no position: a
``patched`` call added, or removed once deprecated, leaves the steps' order as it was.
A check costs a dictionary lookup per step; the table of positions is built once, with
the records a run reads on its first step.
"""

from __future__ import annotations

from typing import Any

from django_jobqueue.errors import StepDivergence

# The records that take a position in a job's sequence (a patch decision takes none,
# nor a child's outcome: its "child" record holds the position).
SEQUENCED = ("step", "sleep", "wait", "child")


class Sequence:
    """One run's view of the job's recorded sequence and of its own so far."""

    def __init__(self, kind: str, job_id: Any) -> None:
        self.kind = kind
        self.job_id = job_id
        self.at: dict[int, dict[str, Any]] = {}  # recorded position -> its record
        self.unsequenced = False  # a step record older than fingerprints
        self.current: list[str] = []  # this run's steps, sleeps and waits, in order
        # Once diverged, every later step of the run raises it again: a task that
        # catches it cannot run on into steps whose records may be another's.
        self.divergence: StepDivergence | None = None

    def load(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.add(record)

    def add(self, record: dict[str, Any]) -> None:
        if record["kind"] not in SEQUENCED:
            return
        seq = record.get("seq")
        if isinstance(seq, int):
            self.at[seq] = record
        else:
            self.unsequenced = True

    @property
    def position(self) -> int:
        """The position the next step, sleep or wait of this run takes."""
        return len(self.current)

    def meet(self, found: dict[str, Any] | None, name: str, version: Any = None) -> int:
        """Note this run's next step (``found``: its record, None if it has none) and
        return its position; raise ``StepDivergence`` if the job recorded something
        else there."""
        if self.divergence is not None:
            raise self.divergence
        position = self.position
        self.current.append(name)
        if found is not None:
            seq = found.get("seq")
            if not isinstance(seq, int):  # unversioned: not checked
                return position
            if seq != position:
                self.diverged(name, f"recorded at position {seq + 1}, met at {position + 1}")
            if found.get("version") != version:
                self.diverged(
                    name,
                    f"recorded at version {found.get('version')!r}, the code is at "
                    f"version {version!r}",
                )
            return position
        there = self.at.get(position)
        if there is not None:
            self.diverged(
                name,
                f"not recorded, and the job recorded {there['name']!r} at its position "
                f"({position + 1})",
            )
        return position

    def replaying(self) -> bool:
        """Whether the job's records already go past this point of the run (a run that
        started before this point's code existed): what ``ctx.patched`` decides by."""
        if self.unsequenced:
            return True
        return any(seq >= self.position for seq in self.at)

    def recorded(self) -> list[str]:
        return [self.at[seq]["name"] for seq in sorted(self.at)]

    def diverged(self, name: str, why: str) -> None:
        recorded, current = self.recorded(), list(self.current)
        self.divergence = StepDivergence(
            f"{self.kind}: job {self.job_id} diverged from its recorded steps at "
            f"{name!r} ({why}): recorded {recorded}, this run {current}. The code changed "
            "while the job was in flight; guard the change with ctx.patched(), or re-run "
            "the job from a step (docs/howto/durable-steps.md)",
            kind=self.kind,
            job_id=self.job_id,
            step=name,
            recorded=recorded,
            current=current,
        )
        raise self.divergence
