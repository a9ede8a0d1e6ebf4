"""The one error the harness expects: a measure that could not run."""

from __future__ import annotations


class BenchError(Exception):
    """A measure could not run. The message is one line for the table; ``detail`` (log
    tails, a traceback) goes to the JSON."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail
