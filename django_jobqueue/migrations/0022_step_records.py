"""Durable steps' records move from a list in the job's row to rows of their own (issue
30): each step appended by one small guarded write instead of a rewrite of every step
before it.

Each job's list becomes its records in order (ids ascending, as the loader reads them).
A stored value that is not a list of records (nested too deeply to decode, or not a
list, written around the queue) becomes one record ``{"unreadable": …}`` holding it as
text, which the loader refuses as it refused the value: nothing is dropped, and no step
is replayed from a record that cannot be read. Reversible: the rows go back into the list.
"""

import json

import django.db.models.deletion
from django.db import migrations, models, router

BATCH = 500


def _records(text):
    """The records a stored ``steps`` value becomes."""
    try:
        value = json.loads(text) if isinstance(text, str | bytes) else text
    except (ValueError, RecursionError):  # not JSON, or nested past the parser
        return [{"unreadable": str(text)}]
    if not isinstance(value, list):
        return [{"unreadable": _compact(value)}]
    return value


def _compact(value):
    return json.dumps(value, separators=(",", ":"))


def to_rows(apps, schema_editor):
    alias = schema_editor.connection.alias
    if not router.allow_migrate(alias, "django_jobqueue", model_name="steprecord"):
        return
    job_table = apps.get_model("django_jobqueue", "Job")._meta.db_table
    StepRecord = apps.get_model("django_jobqueue", "StepRecord")
    with schema_editor.connection.cursor() as cursor:
        # Read as text by a raw cursor: the model's field would fail on a value that is
        # not JSON, which must be carried over, not lost.
        cursor.execute(f"SELECT id, steps FROM {job_table} WHERE steps IS NOT NULL")
        while rows := cursor.fetchmany(BATCH):
            StepRecord.objects.using(alias).bulk_create(
                StepRecord(job_id=job_id, record=r, size=len(_compact(r)))
                for job_id, text in rows
                for r in _records(text)
            )


def to_lists(apps, schema_editor):
    alias = schema_editor.connection.alias
    if not router.allow_migrate(alias, "django_jobqueue", model_name="steprecord"):
        return
    Job = apps.get_model("django_jobqueue", "Job")
    StepRecord = apps.get_model("django_jobqueue", "StepRecord")
    lists: dict = {}
    for job_id, record in (
        StepRecord.objects.using(alias).order_by("job_id", "id").values_list("job_id", "record")
    ):
        lists.setdefault(job_id, []).append(record)
    for job_id, records in lists.items():
        Job.objects.using(alias).filter(id=job_id).update(steps=records)


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobqueue", "0021_merge_lock"),
    ]

    operations = [
        migrations.CreateModel(
            name="StepRecord",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("record", models.JSONField()),
                ("size", models.PositiveIntegerField()),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="step_records",
                        to="django_jobqueue.job",
                    ),
                ),
            ],
            options={
                "verbose_name": "step record",
                "indexes": [models.Index(fields=["job", "id"], name="jobqueue_step_record_job")],
            },
        ),
        migrations.RunPython(to_rows, to_lists, elidable=False),
        migrations.RemoveField(model_name="job", name="steps"),
    ]
