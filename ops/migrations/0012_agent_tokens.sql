-- Bearer tokens for the MCP front door over HTTP (`toolgate agents token`): a token names one
-- registered agent. Only its SHA-256 is stored; the token itself is shown once, to the operator
-- who issued it. Like the other registries, only operators change it: workers (the door) read it.
CREATE TABLE toolgate.agent_tokens (
    token_hash  text        PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    token_id    text        NOT NULL UNIQUE,
    agent_id    text        NOT NULL REFERENCES toolgate.agents (agent_id),
    status      text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX agent_tokens_agent_idx ON toolgate.agent_tokens (agent_id);
REVOKE INSERT, UPDATE, DELETE ON toolgate.agent_tokens FROM toolgate_worker;
