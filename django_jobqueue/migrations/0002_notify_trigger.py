"""On PostgreSQL, the database announces new jobs itself: a statement-level trigger
sends one NOTIFY per queue per INSERT statement (delivered on commit), so an enqueue
is one statement and a bulk insert wakes the workers once. Other databases poll.

Every run updates its job twice, so the jobs table churns: autovacuum is asked to
visit it after 1 % of its rows are dead rather than 20 %, which keeps the dead index
entries that claims and settlements would walk over few.
"""

from django.db import migrations

CREATE = """
CREATE FUNCTION django_jobqueue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('django_jobqueue', q.queue)
    FROM (SELECT DISTINCT queue FROM new_jobs) AS q;
    RETURN NULL;
END
$$;
CREATE TRIGGER django_jobqueue_notify AFTER INSERT ON django_jobqueue_job
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION django_jobqueue_notify();
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
