-- Budgets and rate limits count usage events: one per authorized operation and dimension
-- (the operation's idempotency key is the event id, so a retry is not counted twice).
CREATE TABLE toolgate.usage_events (
    event_id    text        NOT NULL,
    dimension   text        NOT NULL,
    tenant_id   text        NOT NULL,
    run_id      text        NOT NULL,
    tool_name   text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, dimension)
);
CREATE INDEX usage_events_run_idx ON toolgate.usage_events (tenant_id, run_id, dimension);
CREATE INDEX usage_events_tenant_idx ON toolgate.usage_events (tenant_id, dimension, at);
CREATE INDEX usage_events_tool_idx ON toolgate.usage_events (tenant_id, tool_name, at);
DROP TABLE toolgate.usage;  -- counters replaced by the events above

-- Repair-loop control: every failed validation of a logical operation, fingerprinted.
CREATE TABLE toolgate.repair_attempts (
    tenant_id             text        NOT NULL,
    run_id                text        NOT NULL,
    logical_operation_id  text        NOT NULL,
    call_id               text        NOT NULL,
    payload_fingerprint   text        NOT NULL,
    error_fingerprint     text        NOT NULL,
    at                    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, call_id)
);
CREATE INDEX repair_attempts_op_idx ON toolgate.repair_attempts (tenant_id, run_id, logical_operation_id);

-- Escalation: the approver groups a ticket has reached so far, and when it reaches the next.
ALTER TABLE toolgate.approvals ADD COLUMN escalation_level integer NOT NULL DEFAULT 0;
ALTER TABLE toolgate.approvals ADD COLUMN approver_groups text[] NOT NULL DEFAULT '{}';
ALTER TABLE toolgate.approvals ADD COLUMN escalated_at timestamptz;
ALTER TABLE toolgate.approvals ADD COLUMN escalate_at timestamptz;
CREATE INDEX approvals_escalation_idx ON toolgate.approvals (escalate_at) WHERE status = 'PENDING';
