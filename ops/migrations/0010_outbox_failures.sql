-- An outbox row the broker will never take must not block the rows after it: the relay counts
-- its failed attempts, and gives a row up (dead-lettering it) when the broker refuses it for good
-- or it keeps failing.
ALTER TABLE toolgate.outbox ADD COLUMN attempts integer NOT NULL DEFAULT 0;
ALTER TABLE toolgate.outbox ADD COLUMN failed_at timestamptz;
ALTER TABLE toolgate.outbox ADD COLUMN error text;
-- A row that failed waits before it is tried again, so it never holds up the rows behind it.
ALTER TABLE toolgate.outbox ADD COLUMN retry_at timestamptz;
