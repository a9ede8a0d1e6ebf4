"""Workflows left ``running`` with no step open get the status they should have.

Before the fix of ``store.steering.recount``, a retry of a workflow's dead steps (or a
``retry_dead`` with none dead) could count the workflow's open steps before a
settlement of its last step committed, then write that count and ``running`` over the
settlement's final status: the workflow stayed ``running`` for good, every step
terminal, and cleanup never removed it. Each such workflow is recounted here from its
steps and given the status a settlement of its last step gives (``rules.joins.outcome``,
the one rule, which the recount uses too), finished when its last step finished.
A workflow with an open step is left alone. Nothing to undo.
"""

from django.db import migrations, router
from django.db.models import Exists, Max, OuterRef

from django_jobqueue.rules.joins import outcome

# The terminal statuses of a step (``states.TERMINAL`` as this migration was written).
TERMINAL = ("completed", "dead", "cancelled")


def repair(apps, schema_editor):
    """Recount every ``running`` workflow with no step open; the number repaired."""
    alias = schema_editor.connection.alias
    if not router.allow_migrate(alias, "django_jobqueue", model_name="workflow"):
        return 0
    workflows = apps.get_model("django_jobqueue", "Workflow").objects.using(alias)
    jobs = apps.get_model("django_jobqueue", "Job").objects.using(alias)
    steps_of = jobs.filter(workflow_id=OuterRef("id"))
    # Found in one statement (the running workflows without an open step are few).
    stuck = workflows.filter(
        Exists(steps_of), ~Exists(steps_of.exclude(status__in=TERMINAL)), status="running"
    )
    repaired = 0
    for wf in stuck.iterator():
        steps = jobs.filter(workflow_id=wf.id)
        dead = steps.filter(status="dead").count()
        last = steps.aggregate(at=Max("finished_at"))["at"] or wf.created_at
        repaired += workflows.filter(id=wf.id, status="running").update(
            status=outcome(cancel_requested=wf.cancel_requested, steps_dead=dead),
            steps_open=0,
            steps_dead=dead,
            finished_at=last,
        )
    return repaired


class Migration(migrations.Migration):
    dependencies = [("django_jobqueue", "0019_join_functions")]

    operations = [migrations.RunPython(repair, migrations.RunPython.noop, elidable=True)]
