"""MySQL 8 / MariaDB 10.6+: what the partial indexes and the partial unique constraint
give on PostgreSQL and SQLite, built another way (MySQL has no index conditions; Django
skips the conditional unique constraint there and builds the partial indexes as plain,
whole-table ones). Nothing happens on other databases.

- ``idempotency_active``: a stored generated column that is the idempotency key while
  the job is pending or claimed and NULL once it is finished, with a unique index: at
  most one non-terminal job per key, enforced by the database as on PostgreSQL. Binary
  collation, so keys compare byte for byte (as elsewhere) whatever the table's collation.
- the indexes whose condition is a status (claim, next wake-up, lease, dedup candidate)
  rebuilt under the same names with the status as their first column, so a claim walks
  pending rows only rather than every job ever finished (Django builds them whole,
  condition dropped).
- kinds, queues and keys in a binary collation, so they match byte for byte as on the
  other databases.

The column and the collations are invisible to Django's model state. A later migration
that alters ``idempotency_key`` or ``status`` on MySQL must drop the column first, and
one that alters a column listed in ``NAMES`` must set its binary collation again.
"""

from django.db import migrations

# Names compare byte for byte, as on PostgreSQL and SQLite, whatever the table's default
# collation (usually case-insensitive and blind to trailing spaces): a binary NO PAD
# collation for the names and keys the queue matches on (the pause table's queue too,
# since a claim compares the two).
# name: (Django's whole-table columns, the status-led columns built instead)
STATUS_LED = {
    "jobqueue_job_claim": ("priority, visible_at, id", "status, priority, visible_at, id"),
    "jobqueue_job_next": ("visible_at", "status, visible_at"),
    "jobqueue_job_lease": ("claim_expires_at", "status, claim_expires_at"),
    "jobqueue_job_dedup": ("kind, dedup_key, created_at", "status, kind, dedup_key, created_at"),
}
BINARY = {True: "utf8mb4_nopad_bin", False: "utf8mb4_0900_bin"}  # MariaDB / MySQL 8
NAMES = {
    "django_jobqueue_job": [
        ("kind", "varchar(200)", "NOT NULL"),
        ("queue", "varchar(100)", "NOT NULL"),
        ("dedup_key", "varchar(255)", "NULL"),
        ("idempotency_key", "varchar(255)", "NULL"),
    ],
    "django_jobqueue_queuepause": [("queue", "varchar(100)", "NOT NULL")],
}


def create(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    binary = BINARY[connection.mysql_is_mariadb]
    for table, columns in NAMES.items():
        modify = ", ".join(
            f"MODIFY {name} {kind} CHARACTER SET utf8mb4 COLLATE {binary} {null}"
            for name, kind, null in columns
        )
        schema_editor.execute(f"ALTER TABLE {table} {modify}")
    schema_editor.execute(
        "ALTER TABLE django_jobqueue_job ADD COLUMN idempotency_active varchar(255)"
        f" CHARACTER SET utf8mb4 COLLATE {binary} GENERATED ALWAYS AS"
        " (CASE WHEN status IN ('pending', 'claimed') THEN idempotency_key END) STORED"
    )
    schema_editor.execute(
        "CREATE UNIQUE INDEX jobqueue_job_idempotency_active ON django_jobqueue_job"
        " (idempotency_active)"
    )
    _rebuild(schema_editor, {name: led for name, (_, led) in STATUS_LED.items()})


def drop(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    _rebuild(schema_editor, {name: whole for name, (whole, _) in STATUS_LED.items()})
    schema_editor.execute("DROP INDEX jobqueue_job_idempotency_active ON django_jobqueue_job")
    schema_editor.execute("ALTER TABLE django_jobqueue_job DROP COLUMN idempotency_active")
    for table, columns in NAMES.items():
        # Back to the table's default collation.
        modify = ", ".join(f"MODIFY {name} {kind} {null}" for name, kind, null in columns)
        schema_editor.execute(f"ALTER TABLE {table} {modify}")


def _rebuild(schema_editor, indexes):
    """Each named index dropped and built again on the given columns, in one ALTER."""
    changes = ", ".join(
        f"DROP INDEX {name}, ADD INDEX {name} ({columns})" for name, columns in indexes.items()
    )
    schema_editor.execute(f"ALTER TABLE django_jobqueue_job {changes}")


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0007_limits")]

    # Not atomic: MySQL cannot roll DDL back, and Django refuses DDL inside a transaction there.
    operations = [migrations.RunPython(create, drop, atomic=False, elidable=False)]
