"""The function a worker's turn on PostgreSQL counts its joins with
(``store/dialects/postgresql/joining.py``): the children of the steps it completed,
then their workflows (``django_jobqueue_count_down``).

Every member of a chord writes the same two rows, its callback and its workflow, so
two workers' turns take turns on them. A turn calls the function last, once its own
settlements, journal entries and claims are written. The function locks the rows,
children then workflows, each in id order (waiting for a turn that holds one, until
that turn commits), and then counts on a snapshot taken once it holds them (VOLATILE:
each of its statements takes its own, as ``django_jobqueue_key_claims`` of 0015 does
after its locks). So it reads each counter as committed, another turn's count, an
operator's re-arm or cancel included, and the calling statement never writes a row
changed after it began, which PostgreSQL would re-check by starting that statement's
whole plan again.

The counts are those of ``rules.joins`` for completed parents: a child whose last open
parent this turn completed is released (``claimed`` by the calling worker when the
caller says it has room for it, ``take``, with its lease's expiry; else ``pending``), a
batch's ``on_failure`` callback (``join_when = 'failed'``) that no dead parent needs is
cancelled, and a workflow whose last open step this turn closed (a completed step, or a
child cancelled here) takes its final status. Cancelled children are locked too (a
re-arm counts its parents under that lock); only waiting ones are written.
"""

from django.db import migrations

CREATE = """
CREATE FUNCTION django_jobqueue_count_down(
    child_ids uuid[], counts integer[], takes boolean[], expiries timestamptz[],
    workflow_ids uuid[], closed integer[], at timestamptz, worker text
) RETURNS SETOF django_jobqueue_job LANGUAGE plpgsql VOLATILE
-- Its statements find their rows by primary key whatever the values: planned once per
-- session (a pooled connection, which the worker does not set up so, included).
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    -- The rows first, children before workflows, each in id order; then the counts,
    -- on the next statement's snapshot.
    PERFORM 1 FROM django_jobqueue_job AS c
        WHERE c.id = ANY(child_ids) AND c.status IN ('waiting', 'cancelled')
        ORDER BY c.id FOR UPDATE;
    PERFORM 1 FROM django_jobqueue_workflow AS w
        WHERE w.id = ANY(workflow_ids) ORDER BY w.id FOR UPDATE;
    -- c.parents_open > r.n: still waiting; (c.join_when = 'failed' AND c.parents_dead
    -- = 0): a batch's on_failure callback nothing died for, cancelled once released.
    RETURN QUERY WITH child AS (
        UPDATE django_jobqueue_job AS c SET
            parents_open = GREATEST(c.parents_open - r.n, 0),
            status = CASE WHEN c.parents_open > r.n THEN 'waiting'
                WHEN c.join_when = 'failed' AND c.parents_dead = 0 THEN 'cancelled'
                WHEN r.take THEN 'claimed' ELSE 'pending' END,
            visible_at = CASE WHEN c.parents_open > r.n
                OR (c.join_when = 'failed' AND c.parents_dead = 0)
                THEN c.visible_at ELSE GREATEST(c.visible_at, at) END,
            finished_at = CASE WHEN c.parents_open <= r.n
                AND c.join_when = 'failed' AND c.parents_dead = 0
                THEN at ELSE c.finished_at END,
            claimed_by = CASE WHEN c.parents_open <= r.n
                AND NOT (c.join_when = 'failed' AND c.parents_dead = 0) AND r.take
                THEN worker ELSE c.claimed_by END,
            claim_expires_at = CASE WHEN c.parents_open <= r.n
                AND NOT (c.join_when = 'failed' AND c.parents_dead = 0) AND r.take
                THEN r.expires ELSE c.claim_expires_at END,
            run_count = CASE WHEN c.parents_open <= r.n
                AND NOT (c.join_when = 'failed' AND c.parents_dead = 0) AND r.take
                THEN c.run_count + 1 ELSE c.run_count END
        FROM unnest(child_ids, counts, takes, expiries) AS r(id, n, take, expires)
        WHERE c.id = r.id AND c.status = 'waiting'
        RETURNING c.*
    ), flow AS (
        -- The steps closed: the completed ones, and the children cancelled above.
        UPDATE django_jobqueue_workflow AS w SET
            steps_open = GREATEST(w.steps_open - x.n, 0),
            status = CASE WHEN w.steps_open <= x.n AND w.status = 'running' THEN CASE
                WHEN w.cancel_requested THEN 'cancelled' WHEN w.steps_dead > 0 THEN 'failed'
                ELSE 'completed' END ELSE w.status END,
            finished_at = CASE WHEN w.steps_open <= x.n AND w.status = 'running'
                THEN at ELSE w.finished_at END
        FROM (
            SELECT k.id, k.n + (SELECT count(*) FROM child
                WHERE child.workflow_id = k.id AND child.status = 'cancelled')::integer AS n
            FROM unnest(workflow_ids, closed) AS k(id, n)
        ) AS x
        WHERE w.id = x.id
    )
    SELECT * FROM child;
END
$$;
"""

DROP = """
DROP FUNCTION IF EXISTS django_jobqueue_count_down(
    uuid[], integer[], boolean[], timestamptz[], uuid[], integer[], timestamptz, text
);
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("django_jobqueue", "0018_key_slots"),
    ]

    operations = [
        migrations.RunPython(create, drop, elidable=False),
    ]
