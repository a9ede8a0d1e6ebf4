"""A drain's three figures from its timestamps: the whole run, the steady rate and the
start-up, apart (issue 36: a short drain's rate is mostly its start-up).

- **whole run**: the jobs over the time from the workers' start (the harness's clock
  just before it started the first worker process) to the last settlement;
- **steady**: the jobs settled after the first settlement over the time from it to the
  last (the rule the workflow measures use: a turn's settlements share one timestamp,
  so the first turn's jobs are not counted in a time they took none of);
- **start-up**: from the workers' start to the first settlement (imports, connecting,
  the first claim, the first run).

Pure arithmetic, so that it is tested apart from any database
(``tests/unit/test_bench_figures.py``). Every timestamp is seconds since the epoch on
this host's clock: the harness's ``time.time()`` and the database's (or Redis')
timestamps of settlement, all on one machine.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Settlements:
    """What a system's store shows of a drain's settlements."""

    jobs: int  # jobs settled
    first: float  # the first settlement's time
    last: float  # the last one's
    after_first: int  # jobs settled strictly after the first settlement


@dataclass(frozen=True)
class Phases:
    """A drain's whole-run rate, steady rate and start-up, from its timestamps."""

    started: float  # the workers' start
    settled: Settlements

    def __post_init__(self) -> None:
        s = self.settled
        if s.jobs < 1 or not 0 <= s.after_first < s.jobs:
            raise ValueError(f"settlements {s} make no drain")
        if not self.started <= s.first <= s.last:
            raise ValueError(
                f"timestamps out of order: started {self.started}, first {s.first}, last {s.last}"
            )

    @property
    def whole(self) -> float:
        """Jobs a second over the whole run, start-up included."""
        span = self.settled.last - self.started
        return self.settled.jobs / span if span > 0 else math.nan

    @property
    def steady(self) -> float:
        """Jobs a second from the first settlement to the last (NaN: all in one turn)."""
        span = self.settled.last - self.settled.first
        return self.settled.after_first / span if span > 0 else math.nan

    @property
    def startup(self) -> float:
        """Seconds from the workers' start to the first settlement."""
        return self.settled.first - self.started

    def values(self) -> dict[str, float]:
        """The three table values, under the row names the drain measures use."""
        return {"whole": self.whole, "steady": self.steady, "startup": self.startup}

    def raw(self) -> dict[str, Any]:
        return {"started": self.started, **asdict(self.settled), **self.values()}


def fraction(ours: float, limit: float) -> float | None:
    """``ours`` as a fraction of the raw limit's figure (None: there is no sensible one)."""
    if math.isnan(ours) or math.isnan(limit) or limit <= 0:
        return None
    return ours / limit
