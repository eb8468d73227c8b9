-- Every validation and policy decision names its inputs (issue 51, part 3): one row per call and
-- stage, written in the transaction the stage already has for the round (store/call_decisions.py):
-- the policy stage writes its own decision and validation's pass of the same call with its round's
-- usage and audit rows; validation writes its refusals with its round's repair and audit rows.
--
-- A row names the versions that decided (`contracts_digest`: contracts/registry.py `Registry.digest`;
-- `policy_digest`: contracts/policy_set.py, policy rows only), the outcome (`allow`, `pass` or
-- `refuse`, with taxonomy class, code, rule, approvals and approver groups), and what the decision
-- was judged on: `call`, the call as validated (canonical arguments; references only, secret-named
-- keys and registered secret values redacted); `facts`, the environment, the time, quarantine, the
-- tenant's mail domains and the rows the round's lookups found for the call's resources (its own
-- tenant's only); `usage`, the run's and the tenant's day counts and the rate window it saw.
-- `toolgate policy decided CALL_ID` reads them; `toolgate whatif` replays them. Pruned with the
-- other per-call history (store/retention.py, `retention_days`).
CREATE TABLE toolgate.call_decisions (
    tenant_id         text        NOT NULL,
    call_id           text        NOT NULL,
    stage             text        NOT NULL CHECK (stage IN ('validation', 'policy')),
    decided_at_ms     bigint      NOT NULL,  -- the stage's clock, as the decision read it
    tool_name         text        NOT NULL,
    tool_version      text        NOT NULL,
    contracts_digest  text,                  -- NULL: validation's pass carried none (a worker before 0027)
    policy_digest     text,                  -- the policy set's; NULL for validation
    outcome           text        NOT NULL CHECK (outcome IN ('pass', 'allow', 'refuse')),
    taxonomy_class    text,                  -- a refusal's
    code              text,
    rule              text,
    approvals         integer,               -- an allowed call's required approvals
    approver_groups   text[]      NOT NULL DEFAULT '{}',
    call              jsonb,                 -- the call as judged (policy rows)
    facts             jsonb,
    usage             jsonb,
    at                timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, call_id, stage)  -- a round delivered again keeps the first decision
);
CREATE INDEX call_decisions_at_idx ON toolgate.call_decisions (at);
CREATE INDEX call_decisions_call_idx ON toolgate.call_decisions (call_id);
-- The workers' role has the rights 0009's default privileges give every table of the schema: the
-- stages insert, and the pruner (reconciliation) locks old rows (FOR UPDATE) and deletes them.
