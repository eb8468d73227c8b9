-- The audit log's anchor. A hash chain alone cannot tell a log whose newest rows were deleted (or
-- that was emptied) from one that never had them. So every append also records, in the same
-- transaction, the chain's row count and head hash signed with the deployment's Ed25519 key
-- (workers/runtime/audit.py); `toolgate audit verify` checks that every signed checkpoint still
-- names the row at its count. The checkpoints live outside the log and are insert-only like it,
-- and neither table can be emptied by TRUNCATE, whoever asks (its owner has to disable the
-- trigger first, and the checkpoints then still tell).

-- A row's position in the chain (1 = first), so a writer knows the count without counting; rows
-- written before this migration have none (the first append after it counts them once).
ALTER TABLE toolgate.audit_log ADD COLUMN seq bigint;

CREATE TABLE toolgate.audit_heads (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    row_count   bigint      NOT NULL CHECK (row_count >= 0),
    head_hash   text        NOT NULL,
    signature   bytea       NOT NULL
);

CREATE OR REPLACE FUNCTION toolgate.audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%.% is append-only', TG_TABLE_SCHEMA, TG_TABLE_NAME;
END $$;
CREATE TRIGGER audit_heads_append_only BEFORE UPDATE OR DELETE ON toolgate.audit_heads
    FOR EACH ROW EXECUTE FUNCTION toolgate.audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON toolgate.audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.audit_log_append_only();
CREATE TRIGGER audit_heads_no_truncate BEFORE TRUNCATE ON toolgate.audit_heads
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.audit_log_append_only();
