"""The policy handler: tool.validated -> tool.authorized (or a typed refusal on tool.results).

One Postgres transaction per round: the facts every call needs about the resources it
names (one query per lookup kind), the usage counted so far (budgets per run and per tenant
and day, each tool's rate window) under a per-tenant advisory lock so concurrent policy
workers cannot both spend the last unit of a budget, the decisions, the usage events of
the allowed calls, and an audit entry for every refusal.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.contract import Contract
from toolgate.contracts.policy import Policy, load_policy
from toolgate.contracts.registry import Registry
from toolgate.hashing import operation_event, read_event
from toolgate.schemas.models import StageDecision, StageRecord
from toolgate.settings import Settings
from toolgate.states import StageOutcome
from toolgate.store import batch
from toolgate.store.db import make_pool, rows_json
from toolgate.workers.policy.decision import Allow, Deny, Recent, Usage, decide, refs
from toolgate.workers.runtime import audit, fact_loader, facts
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Handler, Inbound
from toolgate.workers.runtime.results import reject_record

STAGE = "policy"

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


class PolicyHandler(Handler[StageRecord]):
    stage = STAGE
    source = "validated"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings, policy: Policy | None = None) -> None:
        self.registry = registry
        self.policy = policy or load_policy(settings.policy_file)
        self.environment = settings.environment
        self.pool = make_pool(settings.database_url, STAGE, autocommit=True)

    async def start(self) -> None:
        await self.pool.open()

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        contracts = {id(c): self.registry.get(c.model.tool_name, c.model.tool_version) for c in calls}
        events = {id(c): usage_event(c.model, contracts[id(c)].is_mutation) for c in calls}
        wanted = facts.needed(r for c in calls for r in refs(c.model, contracts[id(c)]))
        lookups = fact_loader.statements(wanted)
        reads = UsageReads(calls, contracts, list(events.values()), self.policy)
        async with self.pool.connection() as conn, batch.transaction(conn):
            # One round trip: BEGIN, the facts, the tenants' locks and the usage reads. The server
            # runs them in order, so every usage read happens under the tenants' locks.
            results = await batch.run(conn, [batch.BEGIN, *lookups, *reads.statements()])
            known = fact_loader.collect(wanted, results[1 : 1 + len(lookups)])
            usage = reads.usage(results[1 + len(lookups) :])
            now = now_ms()
            spent: list[dict[str, Any]] = []
            refused: list[audit.Entry] = []
            for call in calls:
                record, contract = call.model, contracts[id(call)]
                decision = decide(record, contract, self.policy, known, usage, events[id(call)], now, self.environment)
                if isinstance(decision, Deny):
                    taxonomy, errors, wait = decision.taxonomy_class, decision.errors, decision.retry_after_ms
                    result = reject_record(record, taxonomy, errors, STAGE, call.traceparent, now, retry_after_ms=wait)
                    out.item("results", record.home_partition, result)
                    refused.append(_refusal(record, decision))
                    continue
                self._allow(call, decision, now, out)
                if decision.spends:  # a new operation (not a dry run, not a retry counted before)
                    usage.record(record, events[id(call)], decision.spends, now)
                    spent.append(_event(events[id(call)], decision.spends, record))
            writes = [(_client_side(RECORD), (rows_json(spent),))] if spent else []
            if refused:  # the audit chain's lock and tail first: the rows follow from the tail
                (*_, head) = await batch.run(conn, [*writes, *audit.HEAD])
                writes = [audit.rows_statement(head.rows[0], refused)]
            await batch.run(conn, [*writes, batch.COMMIT])

    def _allow(self, call: Inbound[StageRecord], decision: Allow, now: int, out: Emit) -> None:
        record = call.model
        detail = f"approvals:{decision.required_approvals};spends:{','.join(decision.spends) or '-'}"
        if record.dry_run:  # the preview tells where the real call would leave each budget
            detail += ";budgets:" + ",".join(decision.standing)
        out.item(
            "authorized",
            record.home_partition,
            record.model_copy(
                update={
                    "traceparent": call.traceparent,
                    "required_approvals": decision.required_approvals,
                    "decisions": [
                        *record.decisions,
                        StageDecision(stage=STAGE, outcome=StageOutcome.ALLOW, detail=detail, at_ms=now),
                    ],
                }
            ),
        )


Windows = dict[tuple[str, str], int]  # (tenant, tool) -> window, seconds


class UsageReads:
    """A round's usage reads, as statements of a batch: each tenant's lock (sorted, so two
    workers lock tenants in the same order), then the runs' and days' counters, which of the
    round's events were counted before, and each tool's rate window."""

    def __init__(
        self, calls: list[Inbound[StageRecord]], contracts: dict[int, Contract], event_ids: list[str], policy: Policy
    ) -> None:
        self.tenants = sorted({c.model.tenant_id for c in calls})
        self.runs = sorted({(c.model.tenant_id, c.model.principal.agent_id, c.model.run_id) for c in calls})
        self.event_ids = event_ids
        self.windows: Windows = {}
        for c in calls:
            limit = policy.rate_limit(c.model.tenant_id, contracts[id(c)])
            self.windows[(c.model.tenant_id, c.model.tool_name)] = limit["window_sec"]

    def statements(self) -> list[batch.Statement]:
        return [
            *[(_client_side(LOCK_TENANT), (tenant,)) for tenant in self.tenants],
            (_client_side(PER_RUN), tuple([run[i] for run in self.runs] for i in range(3))),
            (_client_side(PER_DAY), (self.tenants,)),
            (_client_side(COUNTED), (self.event_ids,)),
            (_client_side(RATE), _rate_params(self.windows)),
        ]

    def usage(self, results: list[batch.Result]) -> Usage:
        per_run, per_day, counted, rate = results[len(self.tenants) :]
        usage = Usage()
        usage.per_run = {(t, a, r, d): n for t, a, r, d, n in per_run.rows}
        usage.per_day = {(t, d): n for t, d, n in per_day.rows}
        usage.counted = {row[0] for row in counted.rows}
        usage.rate = _recent(rate.rows)
        return usage


def usage_event(record: StageRecord, is_mutation: bool) -> str:
    """What budgets and rate limits count this call as (toolgate.hashing): a mutation by its
    operation, once however often retried; a read by its call, once however often sent again
    (execution answers a copy from its first outcome: workers/execution/reads.py)."""
    return operation_event(record) if is_mutation else read_event(record)


async def recent_calls(conn: AsyncConnection[Any], windows: Windows) -> dict[tuple[str, str], Recent]:
    """The calls each (tenant, tool) made within its window of so many seconds, from usage events."""
    cur = await conn.execute(RATE, _rate_params(windows))
    return _recent(await cur.fetchall())


def _rate_params(windows: Windows) -> tuple[list[str], list[str], list[int]]:
    return [k[0] for k in windows], [k[1] for k in windows], list(windows.values())


def _recent(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], Recent]:
    return {(tenant, tool): Recent(count, oldest) for tenant, tool, count, oldest in rows}


def _client_side(query: str) -> str:
    """A statement written for binary parameters (%b), for a batch's client-side binding."""
    return query.replace("%b", "%s")


def _event(event_id: str, spends: tuple[str, ...], record: StageRecord) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "tenant_id": record.tenant_id,
        "agent_id": record.principal.agent_id,
        "run_id": record.run_id,
        "tool_name": record.tool_name,
        "spends": spends,
    }


def _refusal(record: StageRecord, decision: Deny) -> audit.Entry:
    error = decision.errors[0]
    return audit.Entry(
        STAGE,
        "refused",
        record.principal.user_id,
        record.call_id,
        record.tenant_id,
        {
            "tool": record.tool_name,
            "version": record.tool_version,
            "taxonomy": str(decision.taxonomy_class),
            "code": error.code,
            "field": error.field,
            "agent": record.principal.agent_id,
            "rule": decision.rule,
            "finding": decision.finding,
        },
    )
