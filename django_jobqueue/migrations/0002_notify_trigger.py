"""On PostgreSQL, the database announces new jobs itself: a statement-level trigger
sends one NOTIFY per queue per INSERT statement (delivered on commit), so an enqueue
is one statement and a bulk insert wakes the workers once. Other databases poll.
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
"""

DROP = """
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
