"""Step names unique in their workflow by a partial index (issue 36): only a workflow's
steps have an entry, so a plain job's insert, claim and settlement write one index entry
fewer each (a status change is never a HOT update: every version of a row is indexed).

- PostgreSQL: the partial index is built ``CONCURRENTLY`` under a name of its own (reads
  and writes go on while it is built), then the whole constraint is dropped and the new
  index takes its name, in one short transaction. Not atomic, as ``CONCURRENTLY``
  requires; if the build fails it leaves nothing behind (the next run drops an invalid
  half-built index first).
- SQLite: the constraint is part of the table's definition, so the table is rebuilt
  without it (Django's way), in one transaction, and the partial index is added.
- MySQL/MariaDB: nothing. It has no partial indexes, so it keeps the whole unique index
  of migration 0012 (NULLs never collide there either: the same rule). A later migration
  that alters this constraint must say what it does on MySQL: Django skips a conditional
  constraint there, so it neither builds nor drops it.
"""

from django.db import migrations, models, transaction
from django.db.migrations.operations.base import Operation

TABLE = "django_jobqueue_job"
NAME = "jobqueue_job_step_name_unique"
BUILDING = "jobqueue_job_step_name_building"

PARTIAL = models.UniqueConstraint(
    condition=models.Q(("workflow__isnull", False)), fields=("workflow", "step_name"), name=NAME
)


class OnlyOn(Operation):
    """``operation``'s schema change on the databases of ``vendors`` only; its change of
    the model state is passed on everywhere (``SeparateDatabaseAndState`` threads it)."""

    reversible = True

    def __init__(self, vendors, operation):
        self.vendors = vendors
        self.operation = operation

    def deconstruct(self):
        return self.__class__.__name__, [self.vendors, self.operation], {}

    def state_forwards(self, app_label, state):
        self.operation.state_forwards(app_label, state)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor in self.vendors:
            with transaction.atomic(using=schema_editor.connection.alias):
                self.operation.database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor in self.vendors:
            with transaction.atomic(using=schema_editor.connection.alias):
                self.operation.database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self):
        return f"{self.operation.describe()} (on {', '.join(sorted(self.vendors))} only)"


def partial_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")
    schema_editor.execute(
        f"CREATE UNIQUE INDEX CONCURRENTLY {BUILDING} ON {TABLE} (workflow_id, step_name)"
        " WHERE workflow_id IS NOT NULL"
    )
    with transaction.atomic(using=schema_editor.connection.alias):
        schema_editor.execute(f"ALTER TABLE {TABLE} DROP CONSTRAINT {NAME}")
        schema_editor.execute(f"ALTER INDEX {BUILDING} RENAME TO {NAME}")


def whole_on_postgresql(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {BUILDING}")
    schema_editor.execute(
        f"CREATE UNIQUE INDEX CONCURRENTLY {BUILDING} ON {TABLE} (workflow_id, step_name)"
    )
    with transaction.atomic(using=schema_editor.connection.alias):
        schema_editor.execute(f"DROP INDEX {NAME}")
        schema_editor.execute(
            f"ALTER TABLE {TABLE} ADD CONSTRAINT {NAME} UNIQUE USING INDEX {BUILDING}"
        )


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0026_run_logs")]

    # Not atomic: PostgreSQL builds an index CONCURRENTLY only outside a transaction.
    atomic = False

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="job", name=NAME),
                migrations.AddConstraint(model_name="job", constraint=PARTIAL),
            ],
            database_operations=[
                migrations.RunPython(
                    partial_on_postgresql, whole_on_postgresql, atomic=False, elidable=False
                ),
                OnlyOn({"sqlite"}, migrations.RemoveConstraint(model_name="job", name=NAME)),
                OnlyOn({"sqlite"}, migrations.AddConstraint(model_name="job", constraint=PARTIAL)),
            ],
        ),
    ]
