"""No index of the pending rows on ``visible_at`` alone (issue 36): every pending row had
an entry in ``jobqueue_job_next`` as well as in the claim index, and its readers (an idle
worker's next wake-up, the oldest due job, the scheduled count) now read the claim index,
``(priority, visible_at, id)``, one priority at a time (``store.sql.PRIORITIES``).

Dropping an index is quick (no scan), under a brief exclusive lock of the table. Undone,
the index is built again; on MySQL/MariaDB status-led, as migration 0008 built it.
"""

from django.db import migrations

STATUS_LED = "DROP INDEX jobqueue_job_next, ADD INDEX jobqueue_job_next (status, visible_at)"


def noop(apps, schema_editor):
    pass


def status_led_on_mysql(apps, schema_editor):
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"ALTER TABLE django_jobqueue_job {STATUS_LED}")


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0027_partial_step_name_unique")]

    # Undone in reverse order: the index built again (whole on MySQL), then status-led there
    # (not atomic: MySQL cannot roll DDL back, and Django refuses DDL in a transaction there).
    operations = [
        migrations.RunPython(noop, status_led_on_mysql, atomic=False, elidable=False),
        migrations.RemoveIndex(model_name="job", name="jobqueue_job_next"),
    ]
