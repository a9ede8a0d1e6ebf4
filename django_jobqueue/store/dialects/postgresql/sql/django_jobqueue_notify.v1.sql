-- django_jobqueue_notify, version 1: the trigger function, and its trigger, by which the
-- database announces new jobs itself: one NOTIFY per queue per INSERT statement on the
-- jobs table (delivered on commit), so a bulk insert wakes the workers once.
-- First created by migration 0002_notify_trigger.
CREATE OR REPLACE FUNCTION django_jobqueue_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('django_jobqueue', q.queue)
    FROM (SELECT DISTINCT queue FROM new_jobs) AS q;
    RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER django_jobqueue_notify AFTER INSERT ON django_jobqueue_job
    REFERENCING NEW TABLE AS new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION django_jobqueue_notify();
