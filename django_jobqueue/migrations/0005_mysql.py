"""MySQL 8 / MariaDB 10.6+: what the partial indexes and the partial unique constraint
give on PostgreSQL and SQLite, built another way (MySQL has no index conditions; Django
skips the conditional unique constraint there and builds the partial indexes as plain,
whole-table ones). Nothing happens on other databases.

- ``idempotency_active``: a stored generated column that is the idempotency key while
  the job is pending or claimed and NULL once it is finished, with a unique index: at
  most one non-terminal job per key, enforced by the database as on PostgreSQL. Binary
  collation, so keys compare byte for byte (as elsewhere) whatever the table's collation.
- ``jobqueue_job_claim_status``: the claim's index led by the status, so a claim walks
  pending rows only rather than every job ever finished.

The column is invisible to Django's model (it never reads or writes it). A later
migration that alters ``idempotency_key`` or ``status`` on MySQL must drop it first.
"""

from django.db import migrations

COLUMN = "idempotency_active"
CREATE = [
    "ALTER TABLE django_jobqueue_job ADD COLUMN idempotency_active varchar(255)"
    " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin GENERATED ALWAYS AS"
    " (CASE WHEN status IN ('pending', 'claimed') THEN idempotency_key END) STORED",
    "CREATE UNIQUE INDEX jobqueue_job_idempotency_active ON django_jobqueue_job"
    " (idempotency_active)",
    "CREATE INDEX jobqueue_job_claim_status ON django_jobqueue_job"
    " (status, priority, visible_at, id)",
]
DROP = [
    "DROP INDEX jobqueue_job_claim_status ON django_jobqueue_job",
    "DROP INDEX jobqueue_job_idempotency_active ON django_jobqueue_job",
    "ALTER TABLE django_jobqueue_job DROP COLUMN idempotency_active",
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "mysql":
        for statement in CREATE:
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "mysql":
        for statement in DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0004_admin_pause_and_search")]

    # Not atomic: MySQL cannot roll DDL back, and Django refuses DDL inside a transaction there.
    operations = [migrations.RunPython(create, drop, atomic=False, elidable=False)]
