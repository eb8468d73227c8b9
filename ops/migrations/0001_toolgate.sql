-- toolgate's own state: idempotency keys, outbox, approvals, approvers, usage, audit log.
CREATE SCHEMA IF NOT EXISTS toolgate;

-- The seeds' idempotency table, plus a lease (who owns a PENDING key until when) and the
-- executable request, so reconciliation can resolve or re-drive a key a crash left PENDING.
CREATE TABLE toolgate.idempotency_keys (
    tenant_id        text        NOT NULL,
    idempotency_key  text        NOT NULL,
    request_hash     text        NOT NULL,
    status           text        NOT NULL CHECK (status IN (
                        'PENDING', 'COMPLETED', 'FAILED_RETRYABLE', 'FAILED_FINAL',
                        'COMPENSATED', 'EXPIRED')),
    tool_name        text        NOT NULL,
    tool_version     text        NOT NULL,
    executor         text        NOT NULL,
    call_id          text        NOT NULL,
    home_partition   integer     NOT NULL,
    attempt          integer     NOT NULL DEFAULT 1,
    request          bytea       NOT NULL,
    response         jsonb,
    error_code       text,
    lease_owner      text,
    lease_until      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    expires_at       timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, idempotency_key)
);
CREATE INDEX idempotency_keys_pending_idx ON toolgate.idempotency_keys (lease_until)
    WHERE status = 'PENDING';
CREATE INDEX idempotency_keys_expires_idx ON toolgate.idempotency_keys (expires_at)
    WHERE status IN ('PENDING', 'COMPLETED', 'FAILED_RETRYABLE');

-- Records to publish, written in the same transaction as the state they describe.
-- kind 'item': one StageRecord/ExecutionResult, batched by the relay into a StageBatch for
-- (topic, partition); kind 'record': a whole edge record with its key and headers.
CREATE TABLE toolgate.outbox (
    id          bigserial   PRIMARY KEY,
    topic       text        NOT NULL,
    partition   integer,
    kind        text        NOT NULL CHECK (kind IN ('item', 'record')),
    key         bytea,
    payload     bytea       NOT NULL,
    headers     jsonb       NOT NULL DEFAULT '[]',
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX outbox_unsent_idx ON toolgate.outbox (id) WHERE sent_at IS NULL;

CREATE FUNCTION toolgate.outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolgate_outbox', '');
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_notify AFTER INSERT ON toolgate.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.outbox_notify();

-- Approvers and their Ed25519 public keys. Never a private key here.
CREATE TABLE toolgate.approvers (
    approver_id   text        PRIMARY KEY,
    public_key    bytea       NOT NULL,
    risk_classes  text[]      NOT NULL,
    groups        text[]      NOT NULL DEFAULT '{}',
    status        text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);

-- Approval tickets: never auto-approved; expiry means AUTO_DENIED.
CREATE TABLE toolgate.approvals (
    approval_id         text        PRIMARY KEY,
    call_id             text        NOT NULL,
    tenant_id           text        NOT NULL,
    run_id              text        NOT NULL,
    tool_name           text        NOT NULL,
    tool_version        text        NOT NULL,
    payload_hash        text        NOT NULL,
    risk_class          text        NOT NULL,
    required_approvals  integer     NOT NULL,
    distinct_approvers  boolean     NOT NULL DEFAULT true,
    status              text        NOT NULL CHECK (status IN (
                            'PENDING', 'APPROVED', 'DENIED', 'AUTO_DENIED')),
    home_partition      integer     NOT NULL,
    request             bytea       NOT NULL,
    packet              jsonb       NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    decided_at          timestamptz
);
CREATE INDEX approvals_pending_idx ON toolgate.approvals (expires_at) WHERE status = 'PENDING';

CREATE TABLE toolgate.approval_decisions (
    decision_id   text        PRIMARY KEY,
    approval_id   text        NOT NULL REFERENCES toolgate.approvals (approval_id),
    approver_id   text        NOT NULL,
    verdict       text        NOT NULL CHECK (verdict IN ('APPROVE', 'DENY')),
    reason        text,
    decided_at    timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (approval_id, approver_id)
);

-- Budget and rate-limit counters per tenant, tool and side-effect class and window.
CREATE TABLE toolgate.usage (
    tenant_id          text        NOT NULL,
    scope              text        NOT NULL,
    window_start       timestamptz NOT NULL,
    count              bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, scope, window_start)
);

-- Append-only and hash-chained: each row carries the hash of the one before.
CREATE TABLE toolgate.audit_log (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    stage       text        NOT NULL,
    action      text        NOT NULL,
    call_id     text,
    tenant_id   text,
    actor       text        NOT NULL,
    detail      jsonb       NOT NULL DEFAULT '{}',
    prev_hash   text        NOT NULL,
    hash        text        NOT NULL UNIQUE
);
CREATE FUNCTION toolgate.audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'toolgate.audit_log is append-only';
END $$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON toolgate.audit_log
    FOR EACH ROW EXECUTE FUNCTION toolgate.audit_log_append_only();

-- What operators did with dead letters (the letters themselves live on tool.deadletter).
CREATE TABLE toolgate.dead_letter_actions (
    dead_letter_id  text        PRIMARY KEY,
    action          text        NOT NULL CHECK (action IN ('replayed', 'discarded')),
    actor           text        NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    note            text
);
