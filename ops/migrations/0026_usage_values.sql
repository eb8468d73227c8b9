-- Budgets of value (issue 51, part 2): what a call spends of a value its contract derives from its
-- arguments (contracts/values.py: money by currency in minor units, e-mail recipients), reserved
-- by the policy round with the call's usage event, in the same transaction and under the same
-- per-tenant advisory lock (store/values.py), and released when the call is later refused or fails
-- for good (approval denied or expired, execution FAILED_FINAL).
--
-- One row per operation and value dimension, keyed as the usage events are (event_id: by
-- operation, toolgate.schemas.hashing.operation_event), so a retry of the operation reserves
-- nothing again (ON CONFLICT DO NOTHING), and `released_at` is set once: a second release of the
-- same operation finds it set and changes nothing. `ended` says the operation ended for good
-- (execution FAILED_FINAL, or compensated): it never runs again, and a retry of it only replays its
-- end. An operation released otherwise (its approval denied or expired) may be proposed again and
-- approved: the policy round that allows that retry reserves its value again, once (store/values.py
-- RESERVE). A run's value is summed from its unreleased
-- rows (a run holds few); a tenant's day is a counter beside them, kept by the same statements
-- that reserve and release (as usage_daily beside the events), charged to the day the value was
-- reserved on.
CREATE TABLE toolgate.usage_values (
    event_id    text        NOT NULL,
    dimension   text        NOT NULL,
    tenant_id   text        NOT NULL,
    agent_id    text        NOT NULL,
    run_id      text        NOT NULL,
    day         date        NOT NULL,
    amount      bigint      NOT NULL CHECK (amount > 0),
    at          timestamptz NOT NULL DEFAULT now(),
    released_at timestamptz,
    ended       boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (event_id, dimension)
);
CREATE INDEX usage_values_run_idx ON toolgate.usage_values (tenant_id, agent_id, run_id) WHERE released_at IS NULL;
CREATE INDEX usage_values_at_idx ON toolgate.usage_values (at);  -- retention

CREATE TABLE toolgate.usage_value_daily (
    tenant_id  text   NOT NULL,
    dimension  text   NOT NULL,
    day        date   NOT NULL,
    used       bigint NOT NULL CHECK (used >= 0),
    PRIMARY KEY (tenant_id, dimension, day)
);
