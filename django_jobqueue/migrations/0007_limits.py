"""Global limits per kind: run-time limits (KindLimit), enqueue rate buckets (RateBucket),
and on PostgreSQL the function a claim calls to learn how many more jobs of a kind with
a max_in_flight it may take.

``django_jobqueue_free_slots`` first takes the transaction-level advisory locks of the
claim's limited kinds, in key order (held until the claim commits), then counts the
kind's claimed jobs. It is VOLATILE, so
its count runs on a snapshot taken after the lock was granted: it sees every claim of
the kind committed before, which a count in the claim statement itself (whose snapshot
is older than the wait for the lock) could miss. The claim calls it only when it comes
to a pending job of a limited kind, so claims that meet none take no lock.
"""

import django.utils.timezone
from django.db import migrations, models

from django_jobqueue.store.dialects.postgresql import functions

# The function's source file (store/dialects/postgresql/sql/), pinned by its digest.
CREATE = functions.pinned("django_jobqueue_free_slots.v1@207c66e94c7ec7b1").text()

DROP = """
DROP FUNCTION IF EXISTS django_jobqueue_free_slots(text, integer, integer, integer[]);
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobqueue', '0006_run_tally'),
    ]

    operations = [
        migrations.CreateModel(
            name='RateBucket',
            fields=[
                ('kind', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('tokens', models.FloatField()),
                ('refilled_at', models.FloatField()),
            ],
            options={
                'verbose_name': 'rate bucket',
            },
        ),
        migrations.CreateModel(
            name='KindLimit',
            fields=[
                ('kind', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('sets_max_in_flight', models.BooleanField(default=False)),
                ('max_in_flight', models.PositiveIntegerField(blank=True, null=True)),
                ('sets_rate_limit', models.BooleanField(default=False)),
                ('rate_limit', models.CharField(blank=True, default='', max_length=32)),
                ('changed_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('changed_by', models.CharField(blank=True, default='', max_length=255)),
            ],
            options={
                'verbose_name': 'kind limit',
                'constraints': [models.CheckConstraint(condition=models.Q(('max_in_flight__isnull', True), ('max_in_flight__gte', 1), _connector='OR'), name='jobqueue_kindlimit_max_in_flight_positive')],
            },
        ),
        migrations.RunPython(create, drop, elidable=False),
    ]
