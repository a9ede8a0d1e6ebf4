"""``bench.pickup_pair``: how the two trees' jobs are paired and summed up, and the
arguments it refuses (the runs themselves are CI's bench leg)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.errors import BenchError
from bench.harness import wait_stamps
from bench.pickup_pair import latencies, main, summary


def test_each_tree_reads_its_own_jobs_in_the_order_of_their_pairs() -> None:
    committed = {"aj0": 1.0, "bj0": 1.5, "aj10": 3.0, "bj10": 3.5, "aj2": 2.0, "bj2": 2.5}
    stamps = {"aj0": 1.001, "aj2": 2.003, "aj10": 3.002, "bj0": 1.502, "bj10": 3.501}
    assert latencies(stamps, committed, "a") == pytest.approx([0.001, 0.003, 0.002])
    # bj2 never started: left out, not counted as a zero
    assert latencies(stamps, committed, "b") == pytest.approx([0.002, 0.001])


def test_the_summary_pairs_the_nth_job_of_each_tree() -> None:
    runs = [
        {"A": [0.0010, 0.0020, 0.0030], "B": [0.0011, 0.0019, 0.0032]},
        {"A": [0.0010, 0.0010, 0.0010], "B": [0.0012, 0.0012, 0.0012]},
    ]
    found = summary(runs)
    assert found["B-A_median_us_each_run"] == [100.0, 200.0]
    assert found["B-A_median_us"] == pytest.approx(200.0)  # of the six pairs pooled
    assert found["A"][0] == pytest.approx(1.0)
    assert found["B"][0] == pytest.approx(1.2)


def test_waiting_for_jobs_that_never_start_ends_with_the_missing_named(tmp_path: Path) -> None:
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("aj0 1.0\n")
    second.write_text("bj0 2.0\n")
    # all there, across both trees' files: returns at once
    assert wait_stamps([first, second], {"aj0", "bj0"}, [], timeout=0.0) == {
        "aj0": 1.0,
        "bj0": 2.0,
    }
    with pytest.raises(BenchError, match=r"1 of 2 stamp jobs never started, e.g. \['aj1'\]"):
        wait_stamps([first], {"aj0", "aj1"}, [], timeout=0.0)


def test_a_tree_without_the_package_or_a_bad_size_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([str(tmp_path), "."])
    assert "holds no django_jobqueue package" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([".", ".", "--jobs", "1"])
    assert "--jobs: 2 or more" in capsys.readouterr().err
