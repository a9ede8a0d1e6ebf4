"""The run tally keeps one bucket column per bound of the run-duration histogram, named
after the bound, in the same order (a change of DURATION_BUCKETS needs a migration)."""

from __future__ import annotations

from django_jobqueue.store import DURATION_BUCKETS
from django_jobqueue.store.monitoring import TALLY_BUCKETS


def column(bound: float) -> str:
    if bound < 1:
        return f"le_{round(bound * 1000)}ms"
    if bound < 60:
        return f"le_{bound:g}s".replace(".", "_")
    return f"le_{bound / 60:g}m" if bound < 3600 else f"le_{bound / 3600:g}h"


def test_the_tally_has_one_bucket_column_per_duration_bound_in_order() -> None:
    assert tuple(column(b) for b in DURATION_BUCKETS) == TALLY_BUCKETS
