"""On PostgreSQL, the database announces new jobs itself: a statement-level trigger
sends one NOTIFY per queue per INSERT statement (delivered on commit), so an enqueue
is one statement and a bulk insert wakes the workers once. Other databases poll.

Every run updates its job twice, so the jobs table churns: autovacuum is asked to
visit it after 1 % of its rows are dead rather than 20 %, which keeps the dead index
entries that claims and settlements would walk over few.
"""

from django.db import migrations

from django_jobqueue.store.dialects.postgresql import functions

# The function and its trigger from their source file (store/dialects/postgresql/sql/),
# pinned by its digest; then the jobs table's autovacuum thresholds.
CREATE = functions.pinned("django_jobqueue_notify.v1@e3e78a8ea2dececc").text() + """
ALTER TABLE django_jobqueue_job SET (
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02
);
"""

DROP = """
ALTER TABLE django_jobqueue_job RESET (
    autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor
);
DROP TRIGGER IF EXISTS django_jobqueue_notify ON django_jobqueue_job;
DROP FUNCTION IF EXISTS django_jobqueue_notify();
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0001_initial")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
