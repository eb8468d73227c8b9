-- Compensation finds the call it undoes by its call_id; a compensated key records the
-- idempotency key of the operation that compensated it.
CREATE INDEX idempotency_keys_call_idx ON toolgate.idempotency_keys (tenant_id, call_id);
ALTER TABLE toolgate.idempotency_keys ADD COLUMN compensated_by text;
