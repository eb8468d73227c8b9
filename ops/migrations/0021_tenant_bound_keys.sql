-- The demo's invoices are each tenant's own (N9). invoice.create_draft derived an invoice's id
-- from the caller's raw idempotency key, and invoice_id alone was the primary key, so one tenant
-- creating a draft under a key took that id from every other tenant: another tenant's draft under
-- the same key failed, and its unique-violation told it why. The key is now (tenant_id,
-- invoice_id), and statements are given a key bound to the tenant (ctx.operation_key, the provider
-- key) in place of the caller's: the column that recorded the caller's key records that one.
-- Rows made before keep their ids and the caller's key they were made with.
ALTER TABLE demo.invoices DROP CONSTRAINT invoices_pkey;
ALTER TABLE demo.invoices ADD PRIMARY KEY (tenant_id, invoice_id);
ALTER TABLE demo.invoices RENAME COLUMN idempotency_key TO operation_key;
ALTER TABLE demo.invoices RENAME CONSTRAINT invoices_tenant_id_idempotency_key_key TO invoices_tenant_id_operation_key_key;

-- A run is its agent's own (N12). Per-run budgets and the repair loop were keyed by (tenant, run_id),
-- and run_id is whatever the agent names: another agent of the tenant that knew a run_id could
-- spend that run's budget or end its repair loop. Both are keyed by (tenant, agent, run_id) now;
-- the agent is the one whose signature validation proved.
--
-- Rows from before: a repair attempt takes the agent that registered its call_id (toolgate.calls),
-- '' where that row is gone. A usage event names no call, so events from before, and the runs'
-- counters made of them, belong to agent '', which no agent is: a run in progress at the upgrade
-- starts its per-run budgets afresh. Per-day budgets and rate windows do not read the agent.
ALTER TABLE toolgate.usage_events ADD COLUMN agent_id text NOT NULL DEFAULT '';
ALTER TABLE toolgate.usage_runs ADD COLUMN agent_id text NOT NULL DEFAULT '';
ALTER TABLE toolgate.usage_runs DROP CONSTRAINT usage_runs_pkey;
ALTER TABLE toolgate.usage_runs ADD PRIMARY KEY (tenant_id, agent_id, run_id, dimension);

CREATE OR REPLACE FUNCTION toolgate.usage_events_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO toolgate.usage_runs AS r (tenant_id, agent_id, run_id, dimension, used)
    SELECT a.tenant_id, a.agent_id, a.run_id, d.dimension, count(*)
    FROM added a CROSS JOIN unnest(a.spends) AS d(dimension)
    GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, agent_id, run_id, dimension) DO UPDATE SET used = r.used + EXCLUDED.used;
    INSERT INTO toolgate.usage_seconds AS s (tenant_id, tool_name, second, calls)
    SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*)
    FROM added GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, tool_name, second) DO UPDATE SET calls = s.calls + EXCLUDED.calls;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION toolgate.usage_events_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE toolgate.usage_runs r SET used = r.used - g.n
    FROM (SELECT o.tenant_id, o.agent_id, o.run_id, d.dimension, count(*) AS n
          FROM removed o CROSS JOIN unnest(o.spends) AS d(dimension) GROUP BY 1, 2, 3, 4) g
    WHERE r.tenant_id = g.tenant_id AND r.agent_id = g.agent_id AND r.run_id = g.run_id AND r.dimension = g.dimension;
    DELETE FROM toolgate.usage_runs r
    USING (SELECT DISTINCT o.tenant_id, o.agent_id, o.run_id, d.dimension
           FROM removed o CROSS JOIN unnest(o.spends) AS d(dimension)) g
    WHERE r.tenant_id = g.tenant_id AND r.agent_id = g.agent_id AND r.run_id = g.run_id AND r.dimension = g.dimension
      AND r.used = 0;
    UPDATE toolgate.usage_seconds s SET calls = s.calls - g.n
    FROM (SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint AS second, count(*) AS n
          FROM removed GROUP BY 1, 2, 3) g
    WHERE s.tenant_id = g.tenant_id AND s.tool_name = g.tool_name AND s.second = g.second;
    DELETE FROM toolgate.usage_seconds s
    USING (SELECT DISTINCT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint AS second FROM removed) g
    WHERE s.tenant_id = g.tenant_id AND s.tool_name = g.tool_name AND s.second = g.second AND s.calls = 0;
    RETURN NULL;
END $$;

ALTER TABLE toolgate.repair_attempts ADD COLUMN agent_id text NOT NULL DEFAULT '';
UPDATE toolgate.repair_attempts r SET agent_id = c.agent_id
FROM toolgate.calls c WHERE c.tenant_id = r.tenant_id AND c.call_id = r.call_id;
DROP INDEX toolgate.repair_attempts_op_idx;
CREATE INDEX repair_attempts_run_idx ON toolgate.repair_attempts (tenant_id, agent_id, run_id, logical_operation_id);
