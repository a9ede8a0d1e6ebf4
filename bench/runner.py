"""A run: every measure, repetition by repetition, the systems taking turns."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from bench.config import Config
from bench.errors import BenchError
from bench.harness import Bench
from bench.measures import measures
from bench.results import Outcome, Results


def _as_bench_error(exc: Exception) -> BenchError:
    if isinstance(exc, BenchError):
        return exc
    return BenchError(f"{type(exc).__name__}: {exc}", traceback.format_exc())


def run(config: Config, bench: Bench, progress: Callable[[str], None]) -> Results:
    """Every measure, repetition by repetition, the systems taking turns (so that a
    drift of the machine spreads over all of them). A failed repetition ends that
    system's measure; the others go on."""
    results: Results = {s.key: {} for s in config.systems}
    broken: dict[str, BenchError] = {}
    for s in config.systems:
        progress(f"{s.key}: installing into {bench.template(s)}")
        try:
            bench.install(s)
        except Exception as exc:
            broken[s.key] = _as_bench_error(exc)
            progress(f"{s.key}: install failed: {broken[s.key]}")
    for m in measures(config.sizes):
        if config.only_measures and m.key not in config.only_measures:
            continue
        for s in config.systems:
            skipped = config.quick and m.quick_systems is not None and s.key not in m.quick_systems
            results[s.key][m.key] = Outcome() if m.runs_for(s) and not skipped else None
        for rep in range(1, config.reps + 1):
            for s in config.systems:
                outcome = results[s.key][m.key]
                if outcome is None or outcome.error is not None:
                    continue
                if s.key in broken:
                    cause = broken[s.key]
                    outcome.error = BenchError(f"install failed: {cause}", cause.detail)
                    continue
                started = time.monotonic()
                try:
                    outcome.reps.append(m.run(bench, s))
                except Exception as exc:
                    outcome.error = _as_bench_error(exc)
                took = time.monotonic() - started
                said = (
                    f"ERROR {outcome.error}"
                    if outcome.error is not None
                    else ", ".join(f"{k}={v:.4g}" for k, v in outcome.reps[-1].values.items())
                )
                progress(f"[{m.key} rep {rep}/{config.reps}] {s.key}: {said} ({took:.1f} s)")
    return results
