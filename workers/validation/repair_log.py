"""The repair loop's record in Postgres: every failed validation of a logical operation, read
and written once per round for the runs whose calls failed (`repair.py` decides). A run is its
agent's own, (tenant, agent, run_id): another agent of the tenant naming the same run_id neither
spends this run's repair budget nor ends its loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry, Resolution
from toolgate.schemas.models import TaxonomyClass, ToolProposal
from toolgate.store import repairs
from toolgate.store.repairs import Repair, Run
from toolgate.workers.validation import repair
from toolgate.workers.validation.decision import Decision, Reject


def run_of(proposal: ToolProposal) -> Run:
    """The run a proposal belongs to: its agent's (proven by its signature), under its run_id."""
    return proposal.tenant_id, proposal.principal.agent_id, proposal.run_id


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
    runs = sorted({run_of(p) for p, _ in failed})
    history = await repairs.of_runs(conn, runs)
    updated: dict[int, Decision] = {}
    recorded: list[Repair] = []
    for p, decision in failed:
        payload_fp = repair.payload_fingerprint(p)
        error_fp = repair.error_fingerprint(decision.errors)
        in_run = [h for h in history if h.run == run_of(p) and h.call_id != p.call_id]
        in_op = [h for h in in_run if h.logical_operation_id == p.logical_operation_id]
        earlier = repair.Earlier(
            frozenset(h.payload_fingerprint for h in in_op),
            frozenset(h.error_fingerprint for h in in_op),
            len(in_op),
            len(in_run),
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
        row = Repair(*run_of(p), p.logical_operation_id, p.call_id, payload_fp, error_fp)
        history.append(row)
        recorded.append(row)
    await repairs.record(conn, recorded)
    return [updated.get(id(p), d) for p, d in zip(proposals, decisions, strict=True)]
