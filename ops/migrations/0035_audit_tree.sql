-- The audit log as a Merkle tree a witness can hold to account (issue 53, part 3). On top of the
-- chain and its per-append checkpoints (0008), the reconciliation worker takes a tree head over the
-- chain's rows every TOOLGATE_AUDIT_TREE_SECONDS: an RFC 6962 root over the rows' chain hashes, as a
-- C2SP checkpoint signed by the deployment's key, with the compact range the next head extends
-- (toolgate/trust/log_tree.py). It sends each head to the witnesses it is configured with and keeps
-- what each answered: a cosignature, or a refusal. Both tables are append-only like the log.

CREATE TABLE toolgate.audit_tree_heads (
    id             bigserial   PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    tree_size      bigint      NOT NULL UNIQUE CHECK (tree_size > 0),
    root_hash      bytea       NOT NULL CHECK (length(root_hash) = 32),
    -- The id of the last audit_log row the tree covers: the next head reads the rows after it.
    last_row_id    bigint      NOT NULL,
    compact_range  bytea       NOT NULL,
    -- The signed checkpoint (c2sp.org/tlog-checkpoint as a c2sp.org/signed-note), and the
    -- deployment key that signed it.
    note           text        NOT NULL,
    key_id         text        NOT NULL
);

CREATE TABLE toolgate.audit_cosignatures (
    id             bigserial   PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    head_id        bigint      NOT NULL REFERENCES toolgate.audit_tree_heads (id),
    witness        text        NOT NULL,
    outcome        text        NOT NULL CHECK (outcome IN ('cosigned', 'refused')),
    -- cosigned: the witness's signature line; refused: its HTTP status (0: unreachable) and answer.
    cosignature    text,
    status         integer,
    answer         text
);
CREATE INDEX audit_cosignatures_by_witness ON toolgate.audit_cosignatures (witness, head_id DESC)
    WHERE outcome = 'cosigned';

CREATE TRIGGER audit_tree_heads_append_only BEFORE UPDATE OR DELETE ON toolgate.audit_tree_heads
    FOR EACH ROW EXECUTE FUNCTION toolgate.audit_log_append_only();
CREATE TRIGGER audit_tree_heads_no_truncate BEFORE TRUNCATE ON toolgate.audit_tree_heads
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.audit_log_append_only();
CREATE TRIGGER audit_cosignatures_append_only BEFORE UPDATE OR DELETE ON toolgate.audit_cosignatures
    FOR EACH ROW EXECUTE FUNCTION toolgate.audit_log_append_only();
CREATE TRIGGER audit_cosignatures_no_truncate BEFORE TRUNCATE ON toolgate.audit_cosignatures
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.audit_log_append_only();

REVOKE UPDATE, DELETE, TRUNCATE ON toolgate.audit_tree_heads, toolgate.audit_cosignatures FROM toolgate_worker;
