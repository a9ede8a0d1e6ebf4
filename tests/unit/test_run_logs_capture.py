"""A run's log capture without a database: its bounds, its loggers and level, a record
seen by two captured loggers kept once, and nothing kept outside a run."""

from __future__ import annotations

import logging

from django_jobqueue import conf
from django_jobqueue.run import logs


def record(name: str, message: str, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, None, None)


def test_past_the_bound_the_first_and_last_halves_are_kept_and_the_rest_counted() -> None:
    capture = logs.Capture(5, logging.INFO, ("app",))
    for n in range(12):
        capture.add(record("app", f"line {n}"))
    captured = capture.captured()
    assert captured is not None
    assert [line["message"] for line in captured.lines] == [
        "line 0",
        "line 1",
        "line 2",
        "line 10",
        "line 11",
    ]
    assert captured.dropped == 7


def test_a_bound_of_one_keeps_the_first_line_and_counts_the_rest() -> None:
    capture = logs.Capture(1, logging.INFO, ("app",))
    for n in range(3):
        capture.add(record("app", f"line {n}"))
    captured = capture.captured()
    assert captured is not None
    assert [line["message"] for line in captured.lines] == ["line 0"]
    assert captured.dropped == 2


def test_a_run_keeps_its_loggers_and_their_children_at_its_level_only() -> None:
    capture = logs.Capture(10, logging.INFO, ("shop.tasks",))
    assert capture.wants(record("shop.tasks", "x"))
    assert capture.wants(record("shop.tasks.charge", "x"))
    assert not capture.wants(record("shop.tasksmore", "x"))
    assert not capture.wants(record("shop", "x"))
    assert not capture.wants(record("shop.tasks", "x", logging.DEBUG))
    every = logs.Capture(10, logging.INFO, ("root",))
    assert every.wants(record("anything.at.all", "x"))


def test_a_record_seen_by_two_captured_loggers_is_kept_once() -> None:
    capture = logs.Capture(10, logging.INFO, ("a",))
    one = record("a.b", "once")
    capture.add(one)
    capture.add(one)
    captured = capture.captured()
    assert captured is not None
    assert len(captured.lines) == 1


def test_a_message_that_does_not_format_is_kept_saying_so() -> None:
    capture = logs.Capture(10, logging.INFO, ("a",))
    bad = logging.LogRecord("a", logging.INFO, __file__, 1, "%d apples", ("many",), None)
    capture.add(bad)
    captured = capture.captured()
    assert captured is not None
    assert captured.lines[0]["message"] == "'%d apples' (its arguments did not format: TypeError)"


def test_records_outside_a_run_are_not_kept_and_a_run_keeps_its_own() -> None:
    settings = conf.validate({"RUN_LOGS_LOGGERS": ["tests.unit.capture"]})
    logger = logging.getLogger("tests.unit.capture")
    logger.info("before")
    with logs.capturing(None, settings) as capture:
        logger.info("during")
        assert capture is not None
        assert logs.current() is not None
    logger.info("after")
    assert logs.current() is None
    captured = logs.captured(capture)
    assert captured is not None
    assert [line["message"] for line in captured.lines] == ["during"]


def test_capture_off_yields_none() -> None:
    settings = conf.validate({"RUN_LOGS": None})
    with logs.capturing("tests.unit", settings) as capture:
        assert capture is None
