-- django_jobqueue_count_down, version 1: the joins of a worker's turn on PostgreSQL.
-- It locks the children, then the workflows, each in id order, and counts on a snapshot
-- taken once it holds them (VOLATILE): a child whose last open parent the turn completed
-- is released (claimed by the worker when `takes` says so, else pending), a batch's
-- on_failure callback no dead parent needs is cancelled, and a workflow whose last open
-- step closed takes its final status. Its CASEs restate rules.joins.join and
-- rules.joins.outcome for completed parents (tests/db/test_join_function.py proves it).
-- Called by the turn (dialects/postgresql/joining.py).
-- Run by migration 0019_join_functions.
CREATE OR REPLACE FUNCTION django_jobqueue_count_down(
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
