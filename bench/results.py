"""What a measure is and what it returns: the types every measure module shares.

Kept apart from the harness (which runs systems) so that the measure modules and the
report can name them without importing the machinery that starts workers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bench.errors import BenchError
from bench.phases import Phases, Settlements
from bench.systems import System

if TYPE_CHECKING:
    from bench.harness import Bench


@dataclass
class Rep:
    """One repetition: the numbers the table shows, and everything behind them."""

    values: dict[str, float]
    raw: dict[str, Any]


@dataclass
class Outcome:
    """One system's repetitions of one measure, or why they stopped."""

    reps: list[Rep] = field(default_factory=list)
    error: BenchError | None = None


@dataclass(frozen=True)
class Drained:
    n: int
    counted: int  # jobs done between the clock's start and stop
    seconds: float
    polls: int
    # The whole run, steady rate and start-up from the settlements' own timestamps
    # (bench/phases.py), where the system shows them and the workers started on a
    # preloaded backlog; None otherwise.
    phases: Phases | None = None

    @property
    def rate(self) -> float:
        """Jobs per second; NaN for a drain that was waited for, not timed."""
        return self.counted / self.seconds if self.seconds else math.nan

    def raw(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "counted": self.counted,
            "seconds": self.seconds,
            "polls": self.polls,
            **({"rate": self.rate} if self.seconds else {}),  # an untimed drain has none
            **({"phases": self.phases.raw()} if self.phases else {}),
        }

    @classmethod
    def from_settlements(cls, settled: Settlements | None, n: int, polls: int) -> Drained:
        """A drain that finished between two polls (an I/O drain of jobs enqueued while
        its workers wait, on a loaded machine), timed by its settlements' own
        timestamps, first to last (the steady rate), where the store shows exactly its
        ``n`` jobs and they took time; refused otherwise."""
        if settled is None or settled.jobs != n or not settled.last > settled.first:
            raise BenchError(f"{n} jobs drained between two polls: too few to time")
        seconds = settled.last - settled.first
        return cls(n=n, counted=settled.after_first, seconds=seconds, polls=polls)

    def values(self) -> dict[str, float]:
        """The table's values of a drain: the polled rate, and the phases where known."""
        return {"rate": self.rate, **(self.phases.values() if self.phases else {})}


@dataclass(frozen=True)
class Row:
    """One line of the table: a value of a measure's repetitions."""

    value: str
    label: str
    lower_is_better: bool = False


def phase_rows() -> tuple[Row, ...]:
    """A drain's rows from its settlement timestamps (bench/phases.py), under its rate."""
    return (
        Row("whole", "  whole run: jobs / (last settlement - workers' start) (jobs/s)"),
        Row("steady", "  steady: first settlement to last (jobs/s)"),
        Row("startup", "  start-up: workers' start to first settlement (s)", True),
    )


def _always(system: System) -> bool:
    return True


@dataclass(frozen=True)
class Measure:
    key: str
    rows: tuple[Row, ...]
    run: Callable[[Bench, System], Rep]
    applies: Callable[[System], bool] = _always
    # In the quick form (CI's smoke run) only these systems run it (None: all it applies
    # to): a measure that repeats another's code path for a peer need not run it twice.
    quick_systems: frozenset[str] | None = None
    # Whether the raw limit (bench/systems/limit.py) runs it too: it is not a queue, so
    # it runs only the measures that say so (and ``applies`` still has the last word).
    limit: bool = False

    def runs_for(self, system: System) -> bool:
        """Whether this measure applies to ``system``."""
        if system.is_limit and not self.limit:
            return False
        return self.applies(system)


Results = dict[str, dict[str, Outcome | None]]  # system key -> measure key -> outcome
