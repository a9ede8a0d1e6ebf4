"""The autovacuum soak's figures: one sample per interval, and the summary the acceptance
asks for (throughput of the last sixth against the first, sizes at a third and at the
end, p99 pickup early and late). Pure: no database, so the soak and its test share it."""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

MIB = 1024 * 1024


@dataclass
class Sample:
    """One interval [t0, t1) of the run (seconds from its start, server clock)."""

    phase: str  # "produce" while the producer runs, then "drain"
    t0: float
    t1: float
    completed: int  # runs completed in the interval
    p50_ms: float | None  # pickup: run started minus job runnable (visible_at)
    p99_ms: float | None
    pending: int
    claimed: int
    heap_bytes: int  # the jobs table, now
    index_bytes: int
    total_bytes: int  # heap + indexes + TOAST
    journal_bytes: int  # the journal, total
    live: int  # pg_stat_user_tables of the jobs table, now
    dead: int
    updates: int
    hot_updates: int
    autovacuums: int
    autoanalyzes: int
    journal_autovacuums: int

    @property
    def rate(self) -> float:
        return self.completed / max(self.t1 - self.t0, 1e-9)

    def row(self) -> str:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.0f}"

        hot = 100 * self.hot_updates / self.updates if self.updates else 0.0
        return (
            f"{self.t1:7.0f} {self.phase:>7} {self.rate:8.0f} {ms(self.p50_ms):>6}"
            f" {ms(self.p99_ms):>6} {self.pending:>7} {self.heap_bytes / MIB:7.1f}"
            f" {self.index_bytes / MIB:7.1f} {self.journal_bytes / MIB:7.1f} {self.dead:>8}"
            f" {self.autovacuums:>4} {hot:5.1f}"
        )


HEADER = (
    "      t   phase   jobs/s  p50ms  p99ms pending  heapMB indexMB journMB     dead   av  hot%"
)


def table(samples: list[Sample]) -> str:
    return "\n".join([HEADER, *(s.row() for s in samples)])


@dataclass
class Summary:
    window: float  # seconds: a sixth of the producer's run
    first_rate: float  # completed jobs/s in the first window
    last_rate: float  # and in the last window of the producer's run
    first_p99_ms: float | None  # the median of the windows' samples' p99
    last_p99_ms: float | None
    start_bytes: int  # the jobs table's total size at the first sample
    third_bytes: int  # a third of the way in
    two_thirds_bytes: int  # two thirds of the way in
    end_bytes: int  # at the end of the producer's run
    max_bytes: int  # the largest it was over the producer's run
    start_index_bytes: int
    third_index_bytes: int
    two_thirds_index_bytes: int
    end_index_bytes: int
    autovacuums: int  # autovacuum runs on the jobs table over the whole soak
    hot_share: float  # HOT updates among the jobs table's updates
    index_sizes: dict[str, int] = field(default_factory=dict)  # at the end

    @property
    def rate_ratio(self) -> float:
        return self.last_rate / self.first_rate if self.first_rate else 0.0

    @property
    def size_ratio(self) -> float:
        return self.end_bytes / self.third_bytes if self.third_bytes else 0.0

    def text(self) -> str:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:.0f} ms"

        return "\n".join(
            [
                f"throughput: first {self.window:.0f} s {self.first_rate:.0f} jobs/s, last"
                f" {self.last_rate:.0f} jobs/s (ratio {self.rate_ratio:.2f})",
                f"p99 pickup: first window {ms(self.first_p99_ms)}, last {ms(self.last_p99_ms)}",
                f"jobs table total (MiB): at the start {self.start_bytes / MIB:.1f}, a third"
                f" {self.third_bytes / MIB:.1f}, two thirds"
                f" {self.two_thirds_bytes / MIB:.1f}, the end {self.end_bytes / MIB:.1f}"
                f" (end / third {self.size_ratio:.2f}), at most {self.max_bytes / MIB:.1f};"
                f" its indexes {self.start_index_bytes / MIB:.1f},"
                f" {self.third_index_bytes / MIB:.1f},"
                f" {self.two_thirds_index_bytes / MIB:.1f}, {self.end_index_bytes / MIB:.1f}",
                f"autovacuums of the jobs table: {self.autovacuums}; HOT updates"
                f" {100 * self.hot_share:.1f} %",
                "indexes at the end (MiB): "
                + ", ".join(f"{k} {v / MIB:.1f}" for k, v in self.index_sizes.items()),
            ]
        )


def _median_p99(samples: list[Sample]) -> float | None:
    values = [s.p99_ms for s in samples if s.p99_ms is not None]
    return statistics.median(values) if values else None


def _rate(samples: list[Sample]) -> float:
    seconds = sum(s.t1 - s.t0 for s in samples)
    return sum(s.completed for s in samples) / seconds if seconds else 0.0


def summarise(samples: list[Sample], seconds: float, index_sizes: dict[str, int]) -> Summary:
    """The figures of the producer's run of ``seconds`` (the drain after it left out)."""
    produce = [s for s in samples if s.phase == "produce" and s.t1 <= seconds]
    if not produce:
        raise ValueError("no sample was taken while the producer ran")
    window = seconds / 6
    first = [s for s in produce if s.t1 <= window] or produce[:1]
    last = [s for s in produce if s.t0 >= seconds - window] or produce[-1:]
    third = min(produce, key=lambda s: abs(s.t1 - seconds / 3))
    two_thirds = min(produce, key=lambda s: abs(s.t1 - seconds * 2 / 3))
    end = produce[-1]
    updates = samples[-1].updates
    return Summary(
        window=window,
        first_rate=_rate(first),
        last_rate=_rate(last),
        first_p99_ms=_median_p99(first),
        last_p99_ms=_median_p99(last),
        start_bytes=produce[0].total_bytes,
        third_bytes=third.total_bytes,
        two_thirds_bytes=two_thirds.total_bytes,
        end_bytes=end.total_bytes,
        max_bytes=max(s.total_bytes for s in produce),
        start_index_bytes=produce[0].index_bytes,
        third_index_bytes=third.index_bytes,
        two_thirds_index_bytes=two_thirds.index_bytes,
        end_index_bytes=end.index_bytes,
        autovacuums=samples[-1].autovacuums,
        hot_share=samples[-1].hot_updates / updates if updates else 0.0,
        index_sizes=index_sizes,
    )


@dataclass(frozen=True)
class Vacuum:
    """One autovacuum visit of the jobs table, from the server's log."""

    at: str  # the log line's time
    removed: int  # pages truncated from the end of the table
    remain: int
    seconds: float

    def text(self) -> str:
        return (
            f"{self.at} {self.removed} pages truncated, {self.remain} remain, {self.seconds:.2f} s"
        )


# log_autovacuum_min_duration=0 makes the server log every visit, as
# 'automatic vacuum of table "db.public.django_jobqueue_job": ...' then
# "pages: N removed, M remain, ..." and later "... elapsed: S s".
_VACUUM = re.compile(
    r"^(?P<at>\S+ \S+) [^\n]*automatic vacuum of table \"[^\"]*\.django_jobqueue_job\""
    r"[^\n]*\n\s*pages: (?P<removed>\d+) removed, (?P<remain>\d+) remain"
    r".*?elapsed: (?P<seconds>[\d.]+) s",
    re.MULTILINE | re.DOTALL,
)


def vacuums(log: str) -> list[Vacuum]:
    return [
        Vacuum(m["at"], int(m["removed"]), int(m["remain"]), float(m["seconds"]))
        for m in _VACUUM.finditer(log)
    ]
