-- An operation that reached a final state never executes again, whatever its key's TTL.
--
-- A key that expires keeps the status it expired from (`expired_from`): idempotency.plan
-- replays an expired key's stored outcome, or refuses, and never runs it as a new operation
-- when its operation already ended. Retention strips an expired final key of its request and
-- response once history is no longer kept, and keeps the rest (who, which request, how it
-- ended) as a tombstone for the tombstone window (workers/reconciliation/retention.py).
ALTER TABLE toolgate.idempotency_keys ADD COLUMN expired_from text
    CHECK (expired_from IN ('COMPLETED', 'FAILED_RETRYABLE', 'FAILED_FINAL', 'COMPENSATED'));
-- Keys that expired before this migration: how they ended is lost. A stored response with no
-- error ended COMPLETED; one with an error is taken as FAILED_FINAL, so it never runs again.
UPDATE toolgate.idempotency_keys
SET expired_from = CASE WHEN error_code IS NULL THEN 'COMPLETED' ELSE 'FAILED_FINAL' END
WHERE status = 'EXPIRED';
CREATE INDEX idempotency_keys_tombstones_idx ON toolgate.idempotency_keys (expires_at)
    WHERE status = 'EXPIRED' AND response IS NOT NULL;

-- A ticket releases one operation, once: when that operation reaches a final state, its
-- ticket is spent (execution's recording transaction, or reconciliation's), and nothing runs
-- under it again, a retry of the same operation included (clearance.py).
ALTER TABLE toolgate.approvals ADD COLUMN spent_at timestamptz;
UPDATE toolgate.approvals a SET spent_at = coalesce(a.consumed_at, now())
FROM toolgate.idempotency_keys k
WHERE k.tenant_id = a.tenant_id AND k.idempotency_key = a.consumed_by
  AND coalesce(k.expired_from, k.status) IN ('COMPLETED', 'FAILED_FINAL', 'COMPENSATED');
