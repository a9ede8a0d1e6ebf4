"""The run tally counts every run, not only the deleted ones (issue 17).

Settlements now add their runs to the tally as they are written, and cleanups no longer
touch it, so the metrics read the tally alone instead of scanning the journal. This
migration adds the journal's runs (those not yet tallied, since the tally held the
deleted ones) to shard 0, once: the one scan of the journal, at migrate time. Stop the
workers while it runs (as for any migration): a run a worker of the old version settles
meanwhile is journalled but not counted.
"""

from datetime import timedelta

from django.db import migrations, models
from django.db.models import Count, Q, Sum

# The journal outcomes that are runs, and the histogram's bounds (seconds), as they stand
# at this migration (store.stats._RUN_OUTCOMES, store.monitoring.DURATION_BUCKETS).
RUN_OUTCOMES = ("retried", "dead", "stale-recovered", "completed", "paused", "released", "cancelled")
BOUNDS = {
    "le_5ms": 0.005,
    "le_10ms": 0.01,
    "le_25ms": 0.025,
    "le_50ms": 0.05,
    "le_100ms": 0.1,
    "le_250ms": 0.25,
    "le_500ms": 0.5,
    "le_1s": 1.0,
    "le_2_5s": 2.5,
    "le_5s": 5.0,
    "le_10s": 10.0,
    "le_30s": 30.0,
    "le_1m": 60.0,
    "le_5m": 300.0,
    "le_15m": 900.0,
    "le_1h": 3600.0,
}


COLUMNS = ("runs", "timed", "microseconds", *BOUNDS)


def journal_runs(apps, alias):
    """The journal's runs by (kind, outcome), counted in the tally's columns."""
    JournalEntry = apps.get_model("django_jobqueue", "JournalEntry")
    rows = (
        JournalEntry.objects.using(alias)
        .filter(outcome__in=RUN_OUTCOMES)
        # An operator's cancel of a pending job is no run (runs always name their worker).
        .exclude(outcome="cancelled", worker="")
        .values("kind", "outcome")
        .order_by("kind", "outcome")
        .annotate(
            n=Count("id"),
            timed_n=Count("duration"),
            total=Sum("duration"),
            **{
                f"n_{name}": Count("id", filter=Q(duration__lte=timedelta(seconds=bound)))
                for name, bound in BOUNDS.items()
            },
        )
    )
    return {
        (row["kind"], row["outcome"]): {
            "runs": row["n"],
            "timed": row["timed_n"],
            "microseconds": (row["total"] or timedelta(0)) // timedelta(microseconds=1),
            **{name: row[f"n_{name}"] for name in BOUNDS},
        }
        for row in rows
    }


def tally_the_journal(apps, schema_editor):
    """Add every run the journal holds to the tally (shard 0)."""
    alias = schema_editor.connection.alias
    RunTally = apps.get_model("django_jobqueue", "RunTally")
    for (kind, outcome), counts in journal_runs(apps, alias).items():
        tally, created = RunTally.objects.using(alias).get_or_create(
            kind=kind, outcome=outcome, shard=0, defaults=counts
        )
        if not created:
            RunTally.objects.using(alias).filter(pk=tally.pk).update(
                **{name: models.F(name) + value for name, value in counts.items()}
            )


def untally_the_journal(apps, schema_editor):
    """Back to counting deleted runs only: the shards folded into one row per kind and
    outcome, less the runs the journal still holds."""
    alias = schema_editor.connection.alias
    RunTally = apps.get_model("django_jobqueue", "RunTally")
    folded: dict[tuple[str, str], dict[str, int]] = {}
    for row in RunTally.objects.using(alias).values("kind", "outcome", *COLUMNS):
        sums = folded.setdefault((row["kind"], row["outcome"]), dict.fromkeys(COLUMNS, 0))
        for name in COLUMNS:
            sums[name] += row[name]
    for key, counts in journal_runs(apps, alias).items():
        sums = folded.setdefault(key, dict.fromkeys(COLUMNS, 0))
        for name in COLUMNS:
            sums[name] = max(sums[name] - counts[name], 0)
    RunTally.objects.using(alias).all().delete()
    RunTally.objects.using(alias).bulk_create(
        RunTally(kind=kind, outcome=outcome, shard=0, **sums)
        for (kind, outcome), sums in folded.items()
        if sums["runs"]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobqueue", "0009_job_times_readable"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="runtally",
            name="jobqueue_run_tally_key",
        ),
        migrations.AddField(
            model_name="runtally",
            name="shard",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.RunPython(tally_the_journal, untally_the_journal, elidable=False),
        migrations.AddConstraint(
            model_name="runtally",
            constraint=models.UniqueConstraint(
                fields=("kind", "outcome", "shard"), name="jobqueue_run_tally_shard_key"
            ),
        ),
    ]
