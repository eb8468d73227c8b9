-- Policy's per-run budgets and per-tool rate windows read counters, not the events themselves.
-- Counting a run's events and a window's call events in every round read every one of them: at
-- 100 calls/s each of the two reads took ~2 ms of Postgres per round (1,000-1,500 rows), and the
-- window's grows with rate x window (60,000 rows at 1,000 calls/s and a 60 s window).
--
-- Statement triggers on usage_events keep both counters, for inserts and for deletes alike, so
-- a counter always equals the count of the events it stands for, whoever writes or prunes them.
-- A window then reads at most one row per second of it, and counts exactly only the events of
-- its oldest, partial second (toolgate/workers/policy/handler.py, RATE).
CREATE TABLE toolgate.usage_runs (
    tenant_id  text   NOT NULL,
    run_id     text   NOT NULL,
    dimension  text   NOT NULL,
    used       bigint NOT NULL CHECK (used >= 0),
    PRIMARY KEY (tenant_id, run_id, dimension)
);

-- Call events per tenant, tool and second (floor of the Unix time of `at`).
CREATE TABLE toolgate.usage_seconds (
    tenant_id  text   NOT NULL,
    tool_name  text   NOT NULL,
    second     bigint NOT NULL,
    calls      bigint NOT NULL CHECK (calls >= 0),
    PRIMARY KEY (tenant_id, tool_name, second)
);

-- Rows are added in key order, so two transactions that count the same keys lock them in the
-- same order.
CREATE FUNCTION toolgate.usage_events_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO toolgate.usage_runs AS r (tenant_id, run_id, dimension, used)
    SELECT tenant_id, run_id, dimension, count(*) FROM added GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, run_id, dimension) DO UPDATE SET used = r.used + EXCLUDED.used;
    INSERT INTO toolgate.usage_seconds AS s (tenant_id, tool_name, second, calls)
    SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*)
    FROM added WHERE dimension = 'call' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (tenant_id, tool_name, second) DO UPDATE SET calls = s.calls + EXCLUDED.calls;
    RETURN NULL;
END $$;

-- A counter that reaches zero goes: counters live exactly as long as their events.
CREATE FUNCTION toolgate.usage_events_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE toolgate.usage_runs r SET used = r.used - g.n
    FROM (SELECT tenant_id, run_id, dimension, count(*) AS n FROM removed GROUP BY 1, 2, 3) g
    WHERE r.tenant_id = g.tenant_id AND r.run_id = g.run_id AND r.dimension = g.dimension;
    DELETE FROM toolgate.usage_runs r USING (SELECT DISTINCT tenant_id, run_id, dimension FROM removed) g
    WHERE r.tenant_id = g.tenant_id AND r.run_id = g.run_id AND r.dimension = g.dimension AND r.used = 0;
    UPDATE toolgate.usage_seconds s SET calls = s.calls - g.n
    FROM (SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint AS second, count(*) AS n
          FROM removed WHERE dimension = 'call' GROUP BY 1, 2, 3) g
    WHERE s.tenant_id = g.tenant_id AND s.tool_name = g.tool_name AND s.second = g.second;
    DELETE FROM toolgate.usage_seconds s
    USING (SELECT DISTINCT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint AS second
           FROM removed WHERE dimension = 'call') g
    WHERE s.tenant_id = g.tenant_id AND s.tool_name = g.tool_name AND s.second = g.second AND s.calls = 0;
    RETURN NULL;
END $$;

CREATE TRIGGER usage_events_added AFTER INSERT ON toolgate.usage_events
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_added();
CREATE TRIGGER usage_events_removed AFTER DELETE ON toolgate.usage_events
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_removed();
-- An event is never changed, only added or pruned: an UPDATE would leave the counters wrong. A
-- TRUNCATE (only the owner may) empties the counters with the events.
CREATE FUNCTION toolgate.usage_events_unchanged() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'usage events are added and pruned, never changed';
END $$;
CREATE TRIGGER usage_events_unchanged BEFORE UPDATE ON toolgate.usage_events
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_unchanged();
CREATE FUNCTION toolgate.usage_events_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE toolgate.usage_runs, toolgate.usage_seconds;
    RETURN NULL;
END $$;
CREATE TRIGGER usage_events_emptied AFTER TRUNCATE ON toolgate.usage_events
    FOR EACH STATEMENT EXECUTE FUNCTION toolgate.usage_events_emptied();

INSERT INTO toolgate.usage_runs (tenant_id, run_id, dimension, used)
SELECT tenant_id, run_id, dimension, count(*) FROM toolgate.usage_events GROUP BY 1, 2, 3;
INSERT INTO toolgate.usage_seconds (tenant_id, tool_name, second, calls)
SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*)
FROM toolgate.usage_events WHERE dimension = 'call' GROUP BY 1, 2, 3;
