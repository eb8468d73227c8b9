-- The trust boundary: who may propose (tenants, agents and their public keys), one meaning per
-- call_id, and approvals bound to the state the approver saw and released only once.

-- A tenant exists once it is registered; its edge topics are created then.
CREATE TABLE toolgate.tenants (
    tenant_id   text        PRIMARY KEY CHECK (tenant_id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Agents belong to one tenant and are granted scopes; a proposal's tenant and scopes come from
-- here, never from the record.
CREATE TABLE toolgate.agents (
    agent_id    text        PRIMARY KEY CHECK (agent_id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    tenant_id   text        NOT NULL REFERENCES toolgate.tenants (tenant_id),
    scopes      text[]      NOT NULL DEFAULT '{}',
    status      text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

-- Ed25519 public keys; several may be active at once (rotation). Never a private key here.
CREATE TABLE toolgate.agent_keys (
    agent_id    text        NOT NULL REFERENCES toolgate.agents (agent_id),
    key_id      text        NOT NULL,
    public_key  bytea       NOT NULL CHECK (length(public_key) = 32),
    status      text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    PRIMARY KEY (agent_id, key_id)
);

-- A call_id means one proposal per tenant: the digest of what it asks for. The same call again
-- is the same call; other content under the same call_id is refused.
CREATE TABLE toolgate.calls (
    tenant_id        text        NOT NULL,
    call_id          text        NOT NULL,
    proposal_digest  text        NOT NULL,
    agent_id         text        NOT NULL,
    at               timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, call_id)
);

-- An approval binds the target's state version the approver saw, and releases one operation:
-- execution consumes it under that operation's idempotency key.
ALTER TABLE toolgate.approvals ADD COLUMN state_version text;
ALTER TABLE toolgate.approvals ADD COLUMN consumed_by text;
ALTER TABLE toolgate.approvals ADD COLUMN consumed_at timestamptz;
