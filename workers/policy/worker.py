"""The policy worker: tool.validated -> tool.authorized (or a typed refusal on tool.results).

One Postgres round per batch: every resource id the batch's arguments name is looked up
with one query per lookup kind.
"""

from __future__ import annotations

from collections import defaultdict

from toolgate.contracts.registry import Registry
from toolgate.schemas.models import StageDecision, StageRecord
from toolgate.settings import Settings
from toolgate.workers.policy.decision import Deny, Owners, decide, resource_refs
from toolgate.workers.runtime.db import make_pool
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.results import reject
from toolgate.workers.runtime.rounds import Handler, Inbound, now_ms

STAGE = "policy"


class PolicyHandler(Handler[StageRecord]):
    stage = STAGE
    source = "validated"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.pool = make_pool(settings.database_url, STAGE)

    async def start(self) -> None:
        await self.pool.open()

    async def owners(self, calls: list[Inbound[StageRecord]]) -> Owners:
        wanted: dict[str, set[str]] = defaultdict(set)
        for call in calls:
            contract = self.registry.get(call.model.tool_name, call.model.tool_version)
            for lookup, _, value in resource_refs(call.model, contract):
                wanted[lookup].add(value)
        found: dict[tuple[str, str], str] = {}
        if not wanted:
            return found
        async with self.pool.connection() as conn:
            for lookup, ids in wanted.items():
                cur = await conn.execute(lookup, {"ids": sorted(ids)})  # type: ignore[arg-type]
                for row in await cur.fetchall():
                    found[(lookup, str(row[0]))] = str(row[1])
        return found

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        owners = await self.owners(calls)
        now = now_ms()
        for call in calls:
            record = call.model
            contract = self.registry.get(record.tool_name, record.tool_version)
            decision = decide(record, contract, owners)
            if isinstance(decision, Deny):
                out.item(
                    "results",
                    record.home_partition,
                    reject(
                        record,
                        decision.taxonomy,
                        decision.errors,
                        stage=STAGE,
                        traceparent=call.traceparent,
                        home_partition=record.home_partition,
                        now_ms=now,
                        warnings=record.warnings,
                    ),
                )
                continue
            out.item(
                "authorized",
                record.home_partition,
                record.model_copy(
                    update={
                        "traceparent": call.traceparent,
                        "required_approvals": decision.required_approvals,
                        "decisions": [
                            *record.decisions,
                            StageDecision(
                                stage=STAGE,
                                outcome="allow",
                                detail=f"approvals:{decision.required_approvals}",
                                at_ms=now,
                            ),
                        ],
                    }
                ),
            )
