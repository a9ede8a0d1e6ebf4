"""The raw limit's schema and statements: what PostgreSQL itself allows for the queue's
guarantees, with psycopg 3 and no framework (issue 36).

A minimal jobs table and a journal table of its own, and the statements a queue with
our guarantees needs at the least:

- a claim that skips locked rows and marks its jobs claimed by one worker
  (``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING``);
- a guarded settlement: only rows still claimed by that worker are settled, and each
  settled job gets one journal row, in the same statement and transaction;
- each batch (a claim, a settlement) its own transaction;
- a wake-up: a job inserted for the pickup measure notifies in its own statement
  (``INSERT_NOTIFY``), and an idle worker LISTENs on the connection it claims with.

What it leaves out is what a queue adds on top: payload validation, kinds and queues,
retries, leases renewed, a run tally, a trigger's wake-ups. Shared by the enqueue side
(``bench.clients.limit``) and the drain worker (``bench.limit_worker``).
"""

from __future__ import annotations

SCHEMA = """
CREATE TABLE limit_job (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}',
    priority integer NOT NULL DEFAULT 0,
    status text NOT NULL DEFAULT 'pending',
    created_at timestamptz NOT NULL DEFAULT now(),
    claimed_by text,
    claimed_at timestamptz,
    finished_at timestamptz
);
CREATE INDEX limit_job_pending ON limit_job (priority, id) WHERE status = 'pending';
CREATE TABLE limit_journal (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL,
    event text NOT NULL,
    worker text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
"""
KIND = "noop"
STAMP_KIND = "stamp"  # the pickup measure's job: payload {"label": …}, stamped as it starts
CHANNEL = "limit_job"  # what an idle worker LISTENs on
INSERT_NOTIFY = (
    "WITH j AS (INSERT INTO limit_job (kind, payload) VALUES (%s, %s) RETURNING 1)"
    " SELECT pg_notify(%s, '') FROM j"
)
INSERT_ONE = "INSERT INTO limit_job (kind, payload) VALUES (%s, %s)"
INSERT_MANY = "INSERT INTO limit_job (kind, payload) SELECT %s, p FROM unnest(%s::jsonb[]) AS p"
COPY = "COPY limit_job (kind, payload) FROM STDIN"
BATCH = 1_000  # rows of one INSERT … SELECT FROM unnest(…)
CLAIM = """
UPDATE limit_job SET status = 'claimed', claimed_by = %(worker)s, claimed_at = now()
WHERE id IN (
    SELECT id FROM limit_job WHERE status = 'pending'
    ORDER BY priority, id FOR UPDATE SKIP LOCKED LIMIT %(limit)s
)
RETURNING id, kind, payload
"""
SETTLE = """
WITH settled AS (
    UPDATE limit_job SET status = 'done', finished_at = now()
    WHERE id = ANY(%(ids)s) AND status = 'claimed' AND claimed_by = %(worker)s
    RETURNING id
)
INSERT INTO limit_journal (job_id, event, worker)
SELECT id, 'completed', %(worker)s FROM settled
"""
DONE = "SELECT count(*) FROM limit_job WHERE status = 'done'"
