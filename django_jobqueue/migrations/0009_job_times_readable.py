"""On PostgreSQL, a job's times stay within what Python reads back: timestamptz holds
years 4713 BC to 294276 AD, Python's datetime 1 to 9999, so a row written around the
queue (raw SQL, or a version before times were clamped) with a time outside that broke
every page, command and worker that read it. Such rows are first clamped to the range
the queue itself keeps (``lifecycle.EARLIEST``..``LATEST``), then a CHECK constraint
keeps them there, added NOT VALID and then validated so the table is not locked
against writes while it is checked. SQLite and MySQL/MariaDB hold no such times.
"""

from django.db import migrations

TABLE = "django_jobqueue_job"
CONSTRAINT = "jobqueue_job_times_readable"
COLUMNS = ("created_at", "visible_at", "claim_expires_at", "finished_at")
# lifecycle.EARLIEST and LATEST, as the migration must not change if they ever do.
EARLIEST = "0001-01-02 00:00:00+00"
LATEST = "9999-01-01 00:00:00+00"


def _within(column):
    return f"{column} BETWEEN '{EARLIEST}'::timestamptz AND '{LATEST}'::timestamptz"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for column in COLUMNS:
        schema_editor.execute(
            f"UPDATE {TABLE} SET {column} = LEAST(GREATEST({column}, %s::timestamptz),"
            f" %s::timestamptz) WHERE NOT ({_within(column)})",
            [EARLIEST, LATEST],
        )
    checks = " AND ".join(f"({column} IS NULL OR {_within(column)})" for column in COLUMNS)
    schema_editor.execute(f"ALTER TABLE {TABLE} ADD CONSTRAINT {CONSTRAINT} CHECK ({checks}) NOT VALID")
    schema_editor.execute(f"ALTER TABLE {TABLE} VALIDATE CONSTRAINT {CONSTRAINT}")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} DROP CONSTRAINT IF EXISTS {CONSTRAINT}")


class Migration(migrations.Migration):
    # Not atomic: the constraint is validated after it is added, in a transaction of
    # its own, so writers are not kept out while the table is scanned.
    atomic = False

    dependencies = [("django_jobqueue", "0008_mysql")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
