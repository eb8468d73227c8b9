"""Retention's I/O: deletes what retention.py says is old enough, and audits it.

Every `retention_interval_seconds` the reconciliation worker runs one pass (`toolgate prune`
runs one by hand). A pass deletes each table's old rows in batches of BATCH, one short
transaction per batch, so it never holds locks the stages wait on for long, and a pass that
finds years of history stops at MAX_BATCHES per table and goes on next time. A pass that
deleted anything appends one audit row saying how many rows of which table went, and the ages
it used.
"""

from __future__ import annotations

import logging
from typing import Any

from toolgate.contracts.budgets import Budgets
from toolgate.contracts.registry import Registry
from toolgate.settings import Settings
from toolgate.store import audit
from toolgate.store import retention as retention_store
from toolgate.store.db import make_pool
from toolgate.store.retention import BATCH, STATEMENTS
from toolgate.telemetry.setup import meter, tracer
from toolgate.topics.catalog import BY_LOGICAL
from toolgate.workers.reconciliation.archive import archive_due
from toolgate.workers.reconciliation.decision import STAGE
from toolgate.workers.reconciliation.evidence import PublicKeys
from toolgate.workers.reconciliation.retention import Ages, Needs, ages

log = logging.getLogger("toolgate.retention")
MAX_BATCHES = 100


def needs_of(registry: Registry, policy: Budgets, settings: Settings) -> Needs:
    """What the readers of the pruned tables need kept, from the contracts, policy and catalog."""
    contracts = list(registry)
    windows = [int(c.document["runtime"]["rate_limits"]["window_sec"]) for c in contracts]
    grants = policy.document.get("rate_limits", {}).get("grants", {})
    windows += [int(w["window_sec"]) for tools in grants.values() for w in tools.values()]
    return Needs(
        proposal_window_s=settings.proposal_max_age_seconds + settings.proposal_future_skew_seconds,
        dedupe_window_s=float(max((c.idempotency_ttl_seconds for c in contracts), default=0)),
        rate_window_s=float(max(windows, default=0)),
        deadletter_retention_s=BY_LOGICAL["deadletter"].retention_ms / 1000.0,
    )


class Pruner:
    def __init__(self, registry: Registry, policy: Budgets, settings: Settings) -> None:
        self.ages: Ages = ages(
            settings.retention_days, settings.retention_tombstone_days, needs_of(registry, policy, settings)
        )
        # Keys of these contracts are refused once expired, so they are kept as tombstones too.
        self.refusing = sorted(f"{c.name}@{c.version}" for c in registry if c.binding.get("expired_key") == "reject")
        self.settings = settings
        self.pool = make_pool(settings.database_url, f"{STAGE}-retention", max_size=1)
        self._deleted = meter().create_counter(
            "toolgate.retention.deleted", unit="{row}", description="rows retention deleted, by table"
        )
        for reason in self.ages.raised:
            log.warning("retention window raised: %s", reason, extra={"stage": STAGE, "action": "retention"})

    async def close(self) -> None:
        await self.pool.close()

    async def prune_once(self) -> dict[str, int]:
        """One pass over every table, after keeping the evidence of the calls whose rows go; returns
        how many rows it deleted from each (and, as `evidence_bundles`, how many bundles it kept)."""
        await self.pool.open()
        deleted: dict[str, int] = {}
        with tracer().start_as_current_span("reconciliation.prune") as span:
            budget_s = self.settings.retention_interval_seconds / 2
            kept = await archive_due(self.pool, PublicKeys.of(self.settings), self._evidence_age(), budget_s)
            span.set_attribute("toolgate.retention.evidence_bundles", kept)
            for table, statement, age_of in STATEMENTS:
                params: dict[str, Any] = {
                    "age": getattr(self.ages, age_of),
                    "batch": BATCH,
                    "refusing": self.refusing,
                    "tombstone": self.ages.key_tombstones,
                }
                deleted[table] = 0
                for _ in range(MAX_BATCHES):
                    async with self.pool.connection() as conn:
                        count = await retention_store.delete_batch(conn, statement, params)
                    deleted[table] += count
                    if count < BATCH:
                        break
                if deleted[table]:
                    self._deleted.add(deleted[table], {"table": table})
                span.set_attribute(f"toolgate.retention.{table}", deleted[table])
            if any(deleted.values()) or kept:
                entry = audit.Entry(
                    STAGE,
                    "pruned",
                    "toolgate",
                    detail={"deleted": deleted, "evidence_kept": kept, "older_than_s": self._ages_s()},
                )
                async with self.pool.connection() as conn, conn.transaction():
                    await audit.append(conn, [entry])
                log.info("pruned", extra={"stage": STAGE, "action": "pruned", "count": sum(deleted.values())})
        return deleted

    def _evidence_age(self) -> float:
        """A call's bundle is kept once the first of its operational rows may go."""
        return float(min(self.ages.calls, self.ages.call_decisions, self.ages.approvals))

    def _ages_s(self) -> dict[str, float]:
        return {
            table: float(getattr(self.ages, age_of)) * (86_400 if age_of == "usage_daily_days" else 1)
            for table, _, age_of in STATEMENTS
        } | {"idempotency_key_tombstones": self.ages.key_tombstones}
