"""The repair loop's record in Postgres: every failed validation of a logical operation, read
and written once per round for the runs whose calls failed (`repair.py` decides)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry, Resolution
from toolgate.schemas.models import TaxonomyClass, ToolProposal
from toolgate.workers.runtime.db import keyed
from toolgate.workers.validation import repair
from toolgate.workers.validation.decision import Decision, Reject

REPAIRS = """
SELECT tenant_id, run_id, logical_operation_id, call_id, payload_fingerprint, error_fingerprint
FROM toolgate.repair_attempts
WHERE (tenant_id, run_id) IN (SELECT * FROM unnest(%b::text[], %b::text[]))
"""
RECORD_REPAIRS = """
INSERT INTO toolgate.repair_attempts (tenant_id, run_id, logical_operation_id, call_id, payload_fingerprint,
    error_fingerprint)
SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[])
ON CONFLICT DO NOTHING
"""


def _contract_limit(registry: Registry, proposal: ToolProposal) -> int | None:
    try:
        contract = registry.resolve(proposal.tool_name, proposal.tool_version)
    except Resolution:
        return None
    limit = contract.binding.get("repair", {}).get("max_attempts_per_operation")
    return int(limit) if limit else None


def failing(proposals: Sequence[ToolProposal], decisions: Sequence[Decision]) -> list[tuple[ToolProposal, Reject]]:
    """The calls whose validation failed in a way the model may repair: the loop's record."""
    return [
        (p, d)
        for p, d in zip(proposals, decisions, strict=True)
        if isinstance(d, Reject) and d.taxonomy_class in repair.REPAIRABLE
    ]


async def apply(
    conn: AsyncConnection[Any],
    proposals: Sequence[ToolProposal],
    decisions: Sequence[Decision],
    limits: dict[str, int],
    registry: Registry,
) -> list[Decision]:
    """The decisions with repair loops that went on too long ended (BUDGET_EXHAUSTED), and
    this round's repairable failures recorded."""
    failed = failing(proposals, decisions)
    if not failed:
        return list(decisions)
    runs = sorted({(p.tenant_id, p.run_id) for p, _ in failed})
    cur = await keyed(conn, REPAIRS, ([t for t, _ in runs], [r for _, r in runs]))
    history: list[tuple[Any, ...]] = list(await cur.fetchall())
    updated: dict[int, Decision] = {}
    recorded: list[tuple[str, ...]] = []
    for p, decision in failed:
        payload_fp = repair.payload_fingerprint(p)
        error_fp = repair.error_fingerprint(decision.errors)
        in_run = [h for h in history if (h[0], h[1]) == (p.tenant_id, p.run_id) and h[3] != p.call_id]
        in_op = [h for h in in_run if h[2] == p.logical_operation_id]
        earlier = repair.Earlier(
            frozenset(h[4] for h in in_op), frozenset(h[5] for h in in_op), len(in_op), len(in_run)
        )
        reason = repair.exhausted(
            payload_fp,
            error_fp,
            earlier,
            _contract_limit(registry, p) or limits["max_attempts_per_operation"],
            limits["budget_per_run"],
        )
        if reason is not None:
            updated[id(p)] = Reject(
                TaxonomyClass.BUDGET_EXHAUSTED,
                repair.exhaustion_errors(reason, decision.errors),
                decision.tool_version,
                decision.warnings,
            )
        row = (p.tenant_id, p.run_id, p.logical_operation_id, p.call_id, payload_fp, error_fp)
        history.append(row)
        recorded.append(row)
    await conn.execute(RECORD_REPAIRS, [list(column) for column in zip(*recorded, strict=True)])
    return [updated.get(id(p), d) for p, d in zip(proposals, decisions, strict=True)]
