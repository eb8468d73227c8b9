-- Execution publishes its results' outbox rows itself once its transaction committed, a hop
-- shorter than waking the relay; it inserts them held (retry_at in the future: the relay takes
-- such a row only if it is still unsent then, as a crash leaves it). Waking the relay for rows
-- it must leave alone would cost it an empty round per execution round: notify only when a
-- statement inserted a row that is due now.
CREATE OR REPLACE FUNCTION toolgate.outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM inserted WHERE retry_at IS NULL OR retry_at <= now()) THEN
        PERFORM pg_notify('toolgate_outbox', '');
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER outbox_notify ON toolgate.outbox;
CREATE TRIGGER outbox_notify AFTER INSERT ON toolgate.outbox REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.outbox_notify();
