"""On PostgreSQL, vacuum never truncates the jobs table.

With ``RETENTION`` on, the jobs table is a window that moves: rows are inserted at one
end and deleted at the other all the time. When autovacuum finds empty pages at the end
of the file it truncates them, under an ACCESS EXCLUSIVE lock on the table: claims and
settlements wait while it holds it, and on a hot standby the lock is replayed and
cancels the queries reading the table. The pages are needed again at once. The
autovacuum soak (``tests/chaos/autovacuum_soak.py``) saw the second visit give back a
fifth to a quarter of the table's pages, grown again within seconds.
``vacuum_truncate = false`` keeps them for the rows to come; ``VACUUM (TRUNCATE)`` still
gives space back by hand.

No fillfactor: every update of a job changes a column that an index or a partial index's
condition names (``status``, ``visible_at``, ``claim_expires_at``, ``finished_at``), so
no update can be HOT, and room left free in each page would only make the table larger.
Nothing happens on other databases.
"""

from django.db import migrations

SET = "ALTER TABLE django_jobqueue_job SET (vacuum_truncate = false)"
RESET = "ALTER TABLE django_jobqueue_job RESET (vacuum_truncate)"


def set_options(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SET)


def reset_options(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(RESET)


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0010_run_tally_counts_every_run")]

    operations = [migrations.RunPython(set_options, reset_options, elidable=False)]
