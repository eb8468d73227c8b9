-- One usage event per operation instead of one per operation and dimension. A new operation
-- wrote two rows or more (its budget dimensions, and 'call' for the rate windows), each with its
-- primary-key and `at` index entries, and the runs' counters one upsert per row; at full speed
-- these were the second dearest statement of a call (66 µs of executor time). Now a row is one
-- operation, the call the rate windows count, and `spends` the budget dimensions it spent. The
-- counters of 0013 follow: the runs' from `spends`, the seconds' from the rows. No budget is
-- named 'call' (binding.schema.json), so the runs' 'call' counters, which nothing read, go.
CREATE TABLE toolgate.usage_operations (
    event_id   text        PRIMARY KEY,
    tenant_id  text        NOT NULL,
    run_id     text        NOT NULL,
    tool_name  text        NOT NULL,
    spends     text[]      NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);
INSERT INTO toolgate.usage_operations (event_id, tenant_id, run_id, tool_name, spends, at)
SELECT event_id, min(tenant_id), min(run_id), min(tool_name),
       coalesce(array_agg(dimension ORDER BY dimension) FILTER (WHERE dimension <> 'call'), '{}'),
       coalesce(min(at) FILTER (WHERE dimension = 'call'), min(at))  -- when the rate windows counted it
FROM toolgate.usage_events GROUP BY event_id;
DROP TABLE toolgate.usage_events;  -- with its triggers and indexes
ALTER TABLE toolgate.usage_operations RENAME TO usage_events;
ALTER INDEX toolgate.usage_operations_pkey RENAME TO usage_events_pkey;
-- The counters again from the events, as 0013 made them: each equals the count it stands for.
TRUNCATE toolgate.usage_runs, toolgate.usage_seconds;
INSERT INTO toolgate.usage_runs (tenant_id, run_id, dimension, used)
SELECT e.tenant_id, e.run_id, d.dimension, count(*) FROM toolgate.usage_events e CROSS JOIN unnest(e.spends) AS d(dimension)
GROUP BY 1, 2, 3;
INSERT INTO toolgate.usage_seconds (tenant_id, tool_name, second, calls)
SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*) FROM toolgate.usage_events GROUP BY 1, 2, 3;

CREATE INDEX usage_events_at_idx ON toolgate.usage_events (at);                       -- retention
CREATE INDEX usage_events_call_idx ON toolgate.usage_events (tenant_id, tool_name, at);  -- rate windows

CREATE OR REPLACE FUNCTION toolgate.usage_events_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO toolgate.usage_runs AS r (tenant_id, run_id, dimension, used)
    SELECT a.tenant_id, a.run_id, d.dimension, count(*) FROM added a CROSS JOIN unnest(a.spends) AS d(dimension)
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, run_id, dimension) DO UPDATE SET used = r.used + EXCLUDED.used;
    INSERT INTO toolgate.usage_seconds AS s (tenant_id, tool_name, second, calls)
    SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*)
    FROM added GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, tool_name, second) DO UPDATE SET calls = s.calls + EXCLUDED.calls;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION toolgate.usage_events_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE toolgate.usage_runs r SET used = r.used - g.n
    FROM (SELECT o.tenant_id, o.run_id, d.dimension, count(*) AS n
          FROM removed o CROSS JOIN unnest(o.spends) AS d(dimension) GROUP BY 1, 2, 3) g
    WHERE r.tenant_id = g.tenant_id AND r.run_id = g.run_id AND r.dimension = g.dimension;
    DELETE FROM toolgate.usage_runs r
    USING (SELECT DISTINCT o.tenant_id, o.run_id, d.dimension FROM removed o CROSS JOIN unnest(o.spends) AS d(dimension)) g
    WHERE r.tenant_id = g.tenant_id AND r.run_id = g.run_id AND r.dimension = g.dimension AND r.used = 0;
    UPDATE toolgate.usage_seconds s SET calls = s.calls - g.n
    FROM (SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint AS second, count(*) AS n
          FROM removed GROUP BY 1, 2, 3) g
    WHERE s.tenant_id = g.tenant_id AND s.tool_name = g.tool_name AND s.second = g.second;
    DELETE FROM toolgate.usage_seconds s
    USING (SELECT DISTINCT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint AS second FROM removed) g
    WHERE s.tenant_id = g.tenant_id AND s.tool_name = g.tool_name AND s.second = g.second AND s.calls = 0;
    RETURN NULL;
END $$;

CREATE TRIGGER usage_events_added AFTER INSERT ON toolgate.usage_events
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_added();
CREATE TRIGGER usage_events_removed AFTER DELETE ON toolgate.usage_events
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_removed();
CREATE TRIGGER usage_events_unchanged BEFORE UPDATE ON toolgate.usage_events
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_unchanged();
CREATE TRIGGER usage_events_emptied AFTER TRUNCATE ON toolgate.usage_events
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_emptied();
