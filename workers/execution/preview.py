"""What a dry run returns: the call as it would run, without running it.

Pure. The effects name what would be touched (a table, an endpoint by its configured name,
a function), never a secret or a resolved credential; the preconditions are the gates the
call has passed on its way here; the impact is what the real call would cost in approvals,
budget, money and reversibility.
"""

from __future__ import annotations

import re
from typing import Any

from toolgate.contracts.budgets import dimensions
from toolgate.contracts.contract import Contract
from toolgate.schemas.hashing import fingerprint
from toolgate.schemas.models import StageRecord
from toolgate.workers.approval.packet import consequence_of

_STATEMENT = re.compile(r"^\s*(INSERT\s+INTO|UPDATE|DELETE\s+FROM|SELECT\b.*?\bFROM)\s+([A-Za-z0-9_.]+)", re.I | re.S)


def effects(contract: Contract) -> list[dict[str, Any]]:
    executor = contract.executor
    kind = executor["kind"]
    if kind == "postgres":
        match = _STATEMENT.match(executor["statement"])
        verb = match.group(1).split()[0].upper() if match else "SQL"
        return [{"kind": "database", "operation": verb, "target": match.group(2) if match else "unknown"}]
    if kind == "http":
        return [
            {
                "kind": "http",
                "operation": executor["method"],
                "target": f"{executor['base_url_ref']}{executor['path']}",
                "external": True,
            }
        ]
    return [{"kind": kind, "operation": "call", "target": executor.get("function", contract.name)}]


def preview(record: StageRecord, contract: Contract, idempotency_key: str | None) -> dict[str, Any]:
    transactional = contract.document["transactional"]
    confirmation = contract.binding.get("confirmation") or {}
    cost = contract.document["runtime"].get("cost_profile") or {}
    return {
        "dry_run": True,
        "would_execute": {
            "tool": contract.name,
            "version": contract.version,
            "side_effect_class": contract.side_effect_class,
            "arguments": record.call.arguments,
            "idempotency_fingerprint": fingerprint(idempotency_key) if idempotency_key else None,
        },
        "effects": effects(contract),
        "consequence": consequence_of(record.call.arguments, contract),
        "expected_after_state": confirmation.get("expected_after_state")
        or (contract.binding.get("verification") or {}).get("expected_state"),
        "preconditions": [
            {"stage": d.stage, "outcome": d.outcome, **({"detail": d.detail} if d.detail else {})}
            for d in record.decisions
        ],
        "impact": {
            "approvals_required": record.required_approvals,
            "approver_groups": record.approver_groups or list(contract.approval.get("approver_groups", [])),
            "budget_dimensions": list(dimensions(contract)),
            "estimated_cost": {"amount": cost.get("cost_per_call", 0), "currency": cost.get("currency", "USD")},
            "reversible": transactional.get("compensation_tool") is not None,
            "compensation": transactional.get("compensation_tool")
            or confirmation.get("compensation")
            or "none declared",
        },
    }
