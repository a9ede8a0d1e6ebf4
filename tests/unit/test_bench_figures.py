"""The benchmark's own arithmetic (bench/phases.py, bench/limit.py, bench/report.py,
bench/breakdown.py, bench/costs.py): a drain's whole run, steady rate and start-up from
its timestamps, the fraction of the raw limit, and the cost breakdown's bucketing."""

from __future__ import annotations

import math
import threading

import pytest

from bench import report
from bench.breakdown import medians, render
from bench.costs import OTHER, Steps, _bucket
from bench.errors import BenchError
from bench.limit import LIMIT, limit_of
from bench.phases import Phases, Settlements, fraction
from bench.results import Drained, Outcome, Rep, Row


def test_phases_split_the_whole_run_into_start_up_and_the_steady_rate() -> None:
    # Workers start at 100; the first turn settles 10 jobs at 102, the last job at 112.
    phases = Phases(100.0, Settlements(jobs=1010, first=102.0, last=112.0, after_first=1000))
    assert phases.startup == pytest.approx(2.0)
    assert phases.whole == pytest.approx(1010 / 12)
    assert phases.steady == pytest.approx(100.0), "the first turn's jobs took no time to count"
    assert phases.values() == {
        "whole": phases.whole,
        "steady": phases.steady,
        "startup": phases.startup,
    }
    assert phases.raw()["jobs"] == 1010


def test_a_drain_settled_in_one_turn_has_no_steady_rate() -> None:
    phases = Phases(0.0, Settlements(jobs=16, first=1.5, last=1.5, after_first=0))
    assert math.isnan(phases.steady)
    assert phases.whole == pytest.approx(16 / 1.5)


@pytest.mark.parametrize(
    ("started", "settled"),
    [
        (5.0, Settlements(jobs=10, first=4.0, last=6.0, after_first=5)),  # before the start
        (0.0, Settlements(jobs=10, first=3.0, last=2.0, after_first=5)),  # last before first
        (0.0, Settlements(jobs=0, first=1.0, last=2.0, after_first=0)),  # nothing settled
        (0.0, Settlements(jobs=10, first=1.0, last=2.0, after_first=10)),  # more than settled
    ],
)
def test_timestamps_that_make_no_drain_are_refused(started: float, settled: Settlements) -> None:
    with pytest.raises(ValueError, match=r"make no drain|out of order"):
        Phases(started, settled)


def test_fraction_of_the_limit() -> None:
    assert fraction(50.0, 200.0) == pytest.approx(0.25)
    assert fraction(50.0, 0.0) is None
    assert fraction(math.nan, 200.0) is None
    assert fraction(50.0, math.nan) is None


def test_each_figure_of_ours_is_matched_to_its_limit() -> None:
    assert limit_of("enqueue_each", "rate") == ("enqueue_each", "rate")
    assert limit_of("enqueue_request", "conn0") == ("enqueue_request", "conn0")
    assert limit_of("enqueue_bulk", "rate") == ("enqueue_bulk", "rate")
    assert limit_of("drain_defaults", "rate") == (LIMIT, "drain_100")
    assert limit_of("drain_2", "steady") == (LIMIT, "drain_100_steady")
    assert limit_of("drain_1", "whole") == (LIMIT, "drain_100_whole")
    assert limit_of("drain_2", "startup") is None, "seconds are no fraction of a rate"
    assert limit_of("pickup_latency", "p50") == ("pickup_latency", "p50")
    assert limit_of("pickup_latency", "p99") == ("pickup_latency", "p99")
    assert limit_of("drain_defaults", "rss") is None


def _outcome(*values: dict[str, float]) -> Outcome:
    return Outcome(reps=[Rep(dict(v), {}) for v in values])


def test_the_table_column_divides_our_median_by_the_limits() -> None:
    results = {
        report.OURS: {"drain_defaults": _outcome({"rate": 300.0}, {"rate": 500.0})},
        LIMIT: {"limit": _outcome({"drain_100": 2000.0}, {"drain_100": 2000.0})},
    }
    assert report._of_limit(results, "drain_defaults", Row("rate", "")) == "0.20"
    assert report._of_limit(results, "drain_defaults", Row("rss", "")) == report.DASH
    assert report._of_limit({}, "drain_defaults", Row("rate", "")) == report.DASH


def test_a_value_some_repetitions_lack_is_summarised_over_those_that_have_it() -> None:
    outcome = _outcome({"rate": 1.0, "whole": 4.0}, {"rate": 3.0})
    assert report.summary(outcome, "whole") == report.Summary(4.0, 4.0, 4.0)
    assert report.summary(outcome, "rate") == report.Summary(2.0, 1.0, 3.0)
    assert report.summary(_outcome({"rate": 1.0}), "steady") is None


def test_profiled_time_is_bucketed_by_module() -> None:
    assert _bucket("/x/site/django_jobqueue/store/dialects/postgresql/storage.py") == (
        "the dialect"
    )
    assert _bucket("/x/site/django_jobqueue/store/inserting.py") == "inserting (store)"
    assert _bucket("/x/django_jobqueue/tracing.py") == "tracing / Sentry"
    assert _bucket("/x/site/sentry_sdk/hub.py") == "tracing / Sentry"
    assert _bucket("/x/site/psycopg/cursor.py").startswith("statement")
    assert _bucket("/usr/lib/python3.11/json/encoder.py") == OTHER


class _Box:
    def outer(self) -> None:
        self.inner()

    def inner(self) -> None:
        return None


def test_steps_count_their_own_time_less_the_nested_steps_on_every_thread() -> None:
    steps = Steps()
    steps.wrap(_Box, "outer", "outer")
    steps.wrap(_Box, "inner", "inner")
    try:
        threads = [threading.Thread(target=_Box().outer) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        _Box().inner()
    finally:
        steps.undo()
    assert steps.calls == {"outer": 4, "inner": 5}
    own = steps.own()
    assert own["outer"] == pytest.approx(steps.inclusive["outer"] - steps.nested["outer"])
    assert steps.nested["outer"] <= steps.inclusive["outer"]
    assert "inner" not in steps.nested, "inner called nothing timed"
    assert not hasattr(_Box.outer, "__wrapped__"), "undo restored the originals"


def test_breakdown_medians_and_table() -> None:
    runs = [{"a": 1.0, "b": 10.0}, {"a": 3.0}, {"a": 2.0, "b": 20.0}]
    assert medians(runs) == {"a": 2.0, "b": 10.0}, "a bucket a run never entered cost 0"
    text = render("t", {"installed": {"a": 2.5}, "absent": {"a": 2.0, "b": 1.0}})
    lines = text.splitlines()
    assert lines[0].split() == ["t", "installed", "absent", "diff"]
    assert lines[2].split() == ["a", "2.5", "2.0", "+0.5"]
    assert lines[3].split() == ["b", "0.0", "1.0", "-1.0"]


def test_a_drain_done_between_two_polls_is_timed_by_its_settlements() -> None:
    drained = Drained.from_settlements(Settlements(100, 10.0, 10.5, 90), n=100, polls=1)
    assert drained.rate == pytest.approx(180.0)  # the 90 after the first, over 0.5 s
    assert drained.raw()["counted"] == 90


@pytest.mark.parametrize(
    "settled",
    [
        None,  # the store shows no settlements
        Settlements(jobs=150, first=1.0, last=2.0, after_first=140),  # more than this drain's
        Settlements(jobs=100, first=1.0, last=1.0, after_first=0),  # all in one instant
    ],
)
def test_a_drain_done_between_two_polls_without_its_own_timestamps_is_refused(
    settled: Settlements | None,
) -> None:
    with pytest.raises(BenchError, match="100 jobs drained between two polls"):
        Drained.from_settlements(settled, n=100, polls=1)
