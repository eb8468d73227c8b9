-- A read's first outcome, by call: a copy of the call (a client's resend, a captured proposal
-- replayed within its signature's window) is answered from it and runs no more
-- (workers/execution/reads.py). Kept for the proposal window only (retention.py): past it, a
-- copy is refused as stale before it reaches execution.
CREATE TABLE toolgate.read_outcomes (
    tenant_id     text        NOT NULL,
    call_id       text        NOT NULL,
    request_hash  text        NOT NULL,
    response      jsonb       NOT NULL,
    at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, call_id)
);
CREATE INDEX read_outcomes_at_idx ON toolgate.read_outcomes (at);
