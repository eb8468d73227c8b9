-- Evidence outlives the operational rows (issue 53, part 4; docs/evidence.md): before retention
-- prunes a call's operational rows (its binding, decisions, approval, idempotency key), the
-- reconciliation worker's pruner assembles the call's evidence bundle and keeps it here, and the
-- prune statements delete a call's rows only once its bundle is kept. `toolgate evidence` reads the
-- archive when the rows are gone. Append-only and never pruned, as the audit log is never pruned.
CREATE TABLE toolgate.evidence_bundles (
    id           bigserial   PRIMARY KEY,
    tenant_id    text        NOT NULL,
    call_id      text        NOT NULL,
    bundle       jsonb       NOT NULL,
    archived_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evidence_bundles_call_idx ON toolgate.evidence_bundles (tenant_id, call_id);
CREATE INDEX evidence_bundles_archived_idx ON toolgate.evidence_bundles (archived_at);

CREATE TRIGGER evidence_bundles_append_only BEFORE UPDATE OR DELETE ON toolgate.evidence_bundles
    FOR EACH ROW EXECUTE FUNCTION toolgate.audit_log_append_only();
CREATE TRIGGER evidence_bundles_no_truncate BEFORE TRUNCATE ON toolgate.evidence_bundles
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.audit_log_append_only();

REVOKE UPDATE, DELETE, TRUNCATE ON toolgate.evidence_bundles FROM toolgate_worker;

-- A call's audit rows, found without a scan of the log (a bundle names them all).
CREATE INDEX audit_log_call_idx ON toolgate.audit_log (tenant_id, call_id);

-- When the call was made (its binding's or first decision's time): `evidence export --since`
-- selects archived calls by it.
ALTER TABLE toolgate.evidence_bundles ADD COLUMN called_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX evidence_bundles_called_idx ON toolgate.evidence_bundles (called_at);

-- A bundle's proofs start from the newest head before the call's first audit row (its compact
-- range), and read only the rows after it.
CREATE INDEX audit_tree_heads_last_row_idx ON toolgate.audit_tree_heads (last_row_id);
