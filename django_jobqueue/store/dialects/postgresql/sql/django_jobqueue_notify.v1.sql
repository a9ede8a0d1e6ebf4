-- django_jobqueue_notify, version 1: the trigger function, and its trigger, by which the
-- database announces new jobs itself: one NOTIFY per queue per INSERT statement on the
-- jobs table (delivered on commit), so a bulk insert wakes the workers once.
-- Run by migration 0002_notify_trigger. The trigger is dropped and made again:
-- CREATE OR REPLACE TRIGGER needs PostgreSQL 14, and the queue runs on 12.
CREATE OR REPLACE FUNCTION django_jobqueue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('django_jobqueue', q.queue)
    FROM (SELECT DISTINCT queue FROM new_jobs) AS q;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS django_jobqueue_notify ON django_jobqueue_job;
CREATE TRIGGER django_jobqueue_notify AFTER INSERT ON django_jobqueue_job
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION django_jobqueue_notify();
