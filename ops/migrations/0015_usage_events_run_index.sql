-- Since policy's budgets read the counters of 0013 (usage_runs), no statement looks usage events
-- up by run: the run index served nothing and cost each call's two events an index entry each.
DROP INDEX toolgate.usage_events_run_idx;
