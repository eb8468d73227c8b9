"""toolgate's usage counters: usage_events (one per operation counted, with the budget dimensions
it spends), the counters migration 0013's triggers keep beside them (usage_runs per run and
dimension, usage_seconds per tenant, tool and second) and usage_daily per tenant, dimension and day.
Policy reads them under a per-tenant advisory lock and adds a round's events in the same
transaction (workers/policy/handler.py); the pruner deletes old days and events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store import batch
from toolgate.store.db import rows_json

# The counters migration 0013's triggers keep beside the events: one row per run and dimension. A
# run is its agent's own (0021): the run_id an agent names is not another agent's run.
PER_RUN = """
SELECT tenant_id, agent_id, run_id, dimension, used FROM toolgate.usage_runs
WHERE (tenant_id, agent_id, run_id) IN (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[]))
"""
PER_DAY = """
SELECT tenant_id, dimension, used FROM toolgate.usage_daily
WHERE tenant_id = ANY(%b) AND day = (now() AT TIME ZONE 'UTC')::date
"""
# A window's calls: the per-second counters of its whole seconds, plus its oldest, partial second
# counted from the events themselves (at most a second of them); and its oldest call, the first
# entry of the call index inside it. However busy the window, a round reads about one row per
# second of it.
RATE = """
SELECT w.tenant_id, w.tool_name, c.calls, c.oldest
FROM unnest(%b::text[], %b::text[], %b::int[]) AS w(tenant_id, tool_name, window_sec)
CROSS JOIN LATERAL (SELECT now() - make_interval(secs => w.window_sec) AS edge) e
CROSS JOIN LATERAL (SELECT floor(extract(epoch FROM e.edge))::bigint AS second) s
CROSS JOIN LATERAL (
    SELECT (coalesce((
        SELECT sum(n.calls) FROM toolgate.usage_seconds n
        WHERE n.tenant_id = w.tenant_id AND n.tool_name = w.tool_name AND n.second > s.second
    ), 0) + (
        SELECT count(*) FROM toolgate.usage_events u
        WHERE u.tenant_id = w.tenant_id AND u.tool_name = w.tool_name
          AND u.at > e.edge AND u.at < to_timestamp(s.second + 1)
    ))::bigint AS calls, (
        SELECT (extract(epoch FROM u.at) * 1000)::bigint FROM toolgate.usage_events u
        WHERE u.tenant_id = w.tenant_id AND u.tool_name = w.tool_name AND u.at > e.edge
        ORDER BY u.at LIMIT 1
    ) AS oldest
    OFFSET 0  -- computed once, not again for the filter below
) c
WHERE c.calls > 0
"""
LOCK_TENANT = "SELECT pg_advisory_xact_lock(hashtext('toolgate-usage'), hashtext(%s))"
# Which of the round's operations were counted before: one primary-key lookup per event id,
# whatever the table's statistics say (seen at 100,000 calls with stale ones: a plan that read
# an index whole, slow on every round; docs/performance.md, "Figures behind the code"). The LIMIT
# keeps the planner from making the lookups one join, which it may answer by reading the table
# whole.
COUNTED = """
SELECT i.event_id FROM unnest(%b::text[]) AS i(event_id)
CROSS JOIN LATERAL (SELECT FROM toolgate.usage_events e WHERE e.event_id = i.event_id LIMIT 1) AS found
"""
# One event per operation (migration 0017), with the budget dimensions it spends. Only the events
# inserted now (not those of an operation counted before) add to the day's counters.
RECORD = """
WITH counted AS (
    INSERT INTO toolgate.usage_events (event_id, tenant_id, agent_id, run_id, tool_name, spends)
    SELECT e.event_id, e.tenant_id, e.agent_id, e.run_id, e.tool_name, e.spends
    FROM jsonb_to_recordset(%s::jsonb)
        AS e(event_id text, tenant_id text, agent_id text, run_id text, tool_name text, spends text[])
    ON CONFLICT DO NOTHING
    RETURNING tenant_id, spends, at
)
INSERT INTO toolgate.usage_daily AS d (tenant_id, dimension, day, used)
SELECT c.tenant_id, s.dimension, (c.at AT TIME ZONE 'UTC')::date, count(*)
FROM counted c CROSS JOIN unnest(c.spends) AS s(dimension)
GROUP BY 1, 2, 3
ON CONFLICT (tenant_id, dimension, day) DO UPDATE SET used = d.used + EXCLUDED.used
"""

Run = tuple[str, str, str]  # (tenant, agent, run_id)
Windows = dict[tuple[str, str], int]  # (tenant, tool) -> window, seconds


@dataclass(frozen=True, slots=True)
class Window:
    """The calls a tenant's tool made within its rate window, and when the oldest of them was."""

    tenant_id: str
    tool_name: str
    count: int
    oldest_ms: int | None


@dataclass(frozen=True, slots=True)
class Read:
    """What a round's usage reads found: each run's and each tenant's day's counters by
    dimension, the round's events counted before, and each tool's rate window."""

    per_run: dict[tuple[str, str, str, str], int]  # (tenant, agent, run_id, dimension) -> used
    per_day: dict[tuple[str, str], int]  # (tenant, dimension) -> used today
    counted: set[str]  # event ids
    windows: list[Window]


@dataclass(frozen=True, slots=True)
class Event:
    """One operation counted: the budget dimensions it spends."""

    event_id: str
    tenant_id: str
    agent_id: str
    run_id: str
    tool_name: str
    spends: tuple[str, ...]


def reads(tenants: Sequence[str], runs: Sequence[Run], event_ids: list[str], windows: Windows) -> list[batch.Statement]:
    """A round's usage reads, as statements of a batch: each tenant's lock (sorted, so two
    workers lock tenants in the same order), then the runs' and days' counters, which of the
    round's events were counted before, and each tool's rate window (`read` takes their results)."""
    return [
        *[(LOCK_TENANT, (tenant,)) for tenant in sorted(tenants)],
        (PER_RUN, tuple([run[i] for run in runs] for i in range(3))),
        (PER_DAY, (list(tenants),)),
        (COUNTED, (event_ids,)),
        (RATE, _rate_params(windows)),
    ]


def read(tenants: Sequence[str], results: list[batch.Result]) -> Read:
    """What the statements of `reads` for these tenants found."""
    per_run, per_day, counted, rate = results[len(tenants) :]
    return Read(
        {(t, a, r, d): n for t, a, r, d, n in per_run.rows},
        {(t, d): n for t, d, n in per_day.rows},
        {row[0] for row in counted.rows},
        [Window(*row) for row in rate.rows],
    )


def record(events: Sequence[Event]) -> batch.Statement:
    """The statement that counts these events (an operation counted before is not again)."""
    return RECORD, (rows_json(list(events)),)


async def recent_calls(conn: AsyncConnection[Any], windows: Windows) -> dict[tuple[str, str], Window]:
    """The calls each (tenant, tool) made within its window of so many seconds, from usage events."""
    cur = await conn.execute(RATE, _rate_params(windows))
    return {(w.tenant_id, w.tool_name): w for w in (Window(*row) for row in await cur.fetchall())}


def _rate_params(windows: Windows) -> tuple[list[str], list[str], list[int]]:
    return [k[0] for k in windows], [k[1] for k in windows], list(windows.values())
