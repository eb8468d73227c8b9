"""The policy gates: scopes, tenant binding, and the side-effect class's approval posture.

A pure function of the call, its contract and the ownership of the resources its arguments
name (read by the worker in one batched round). Fail-closed: a call passes only when every
gate explicitly allows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from toolgate.contracts.registry import Contract
from toolgate.schemas.models import FieldError, StageRecord
from toolgate.taxonomy import Taxonomy

# The least approval each side-effect class needs, whatever its contract says.
MIN_APPROVALS = {
    "READ_ONLY": 0,
    "EPHEMERAL_WRITE": 0,
    "LOW_RISK_INTERNAL": 0,
    "MEDIUM_RISK_WRITE": 0,
    "HIGH_RISK_EXTERNAL": 1,
    "CRITICAL_MUTATION": 2,
}

Owners = Mapping[tuple[str, str], str]  # (lookup, id) -> owning tenant; absent: no such resource


@dataclass(frozen=True)
class Allow:
    required_approvals: int


@dataclass(frozen=True)
class Deny:
    taxonomy: Taxonomy
    errors: tuple[FieldError, ...]


def decide(record: StageRecord, contract: Contract, owners: Owners) -> Allow | Deny:
    missing = [s for s in contract.required_scopes if s not in set(record.principal.scopes)]
    if missing:
        return Deny(
            Taxonomy.PERMISSION_DENIED,
            (
                FieldError(
                    field="principal.scopes",
                    code="missing_scope",
                    message=f"{contract.name} needs scopes {', '.join(contract.required_scopes)}",
                    expected=", ".join(contract.required_scopes),
                    actual="missing " + ", ".join(missing),
                ),
            ),
        )
    for ref in resource_refs(record, contract):
        lookup, argument, value = ref
        owner = owners.get((lookup, value))
        if owner is None:
            return Deny(
                Taxonomy.STALE_STATE,
                (
                    FieldError(
                        field=argument,
                        code="resource_missing",
                        actual=value,
                        message=f"{argument} {value} does not exist; refresh state and re-plan",
                    ),
                ),
            )
        if owner != record.tenant_id:
            return Deny(
                Taxonomy.PERMISSION_DENIED,
                (
                    FieldError(
                        field=argument,
                        code="cross_tenant",
                        actual=value,
                        expected=f"a resource of tenant {record.tenant_id}",
                        message=f"{argument} {value} is not a resource of your tenant",
                    ),
                ),
            )
    side_effect = contract.side_effect_class
    if side_effect not in MIN_APPROVALS:
        return Deny(
            Taxonomy.POLICY_VIOLATION,
            (
                FieldError(
                    field=None,
                    code="unknown_side_effect_class",
                    actual=side_effect,
                    message=f"no policy covers side-effect class {side_effect}; refusing (fail closed)",
                ),
            ),
        )
    return Allow(max(MIN_APPROVALS[side_effect], contract.required_approvals))


def resource_refs(record: StageRecord, contract: Contract) -> list[tuple[str, str, str]]:
    """(lookup, argument, id) for every tenant-owned resource the arguments name."""
    refs = []
    for binding in contract.binding.get("tenant_binding", []):
        value = record.arguments.get(binding["argument"])
        if isinstance(value, str):
            refs.append((binding["lookup"], binding["argument"], value))
    return refs
