-- Retention (workers/reconciliation/retention.py) deletes history by age, in small batches:
-- these indexes let each batch find the oldest rows without reading the whole table. B-trees,
-- not BRIN: rows are deleted from the old end and their space reused by new rows, which would
-- widen every BRIN range until it excludes nothing.
CREATE INDEX calls_at_idx ON toolgate.calls (at);
CREATE INDEX usage_events_at_idx ON toolgate.usage_events (at);
CREATE INDEX repair_attempts_at_idx ON toolgate.repair_attempts (at);
CREATE INDEX approvals_decided_idx ON toolgate.approvals (decided_at) WHERE status <> 'PENDING';
-- A call is kept while an approval of it is.
CREATE INDEX approvals_call_idx ON toolgate.approvals (tenant_id, call_id);
CREATE INDEX dead_letter_actions_at_idx ON toolgate.dead_letter_actions (at);

-- Keys expire from every settled status (COMPENSATED too), and expired keys are pruned by age.
DROP INDEX toolgate.idempotency_keys_expires_idx;
CREATE INDEX idempotency_keys_expires_idx ON toolgate.idempotency_keys (expires_at)
    WHERE status IN ('COMPLETED', 'FAILED_RETRYABLE', 'FAILED_FINAL', 'COMPENSATED');
CREATE INDEX idempotency_keys_expired_idx ON toolgate.idempotency_keys (expires_at) WHERE status = 'EXPIRED';
