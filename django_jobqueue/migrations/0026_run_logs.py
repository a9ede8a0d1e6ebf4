"""Each run's own log lines (issue 34): a table of them per job and run, written with the
run's settlement and deleted with the job."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobqueue", "0025_terminate_requests"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunLog",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("run_no", models.PositiveIntegerField()),
                ("lines", models.JSONField()),
                ("dropped", models.PositiveIntegerField(default=0)),
                (
                    "job",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="run_logs",
                        to="django_jobqueue.job",
                    ),
                ),
            ],
            options={
                "verbose_name": "run log",
                "indexes": [models.Index(fields=["job", "run_no"], name="jobqueue_run_log_job")],
            },
        ),
    ]
