"""A merge-lock row per kind and dedup key (issue 30).

An enqueue with a merge (a dedup key: ``merge()``, ``debounce``) locks its key's row
first, in its own transaction, so a burst of one key takes turns: the first inserts, the
others merge into it. A unique index over a key's pending rows would not do: several
pending jobs of one key are allowed (``Merge.independent()``, a candidate answering to
another idempotency key).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobqueue", "0020_repair_stuck_workflows"),
    ]

    operations = [
        migrations.CreateModel(
            name="MergeLock",
            fields=[
                ("name", models.CharField(max_length=64, primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "merge lock",
            },
        ),
    ]
