"""The policy document: rules and budgets as data, admitted at start, evaluated fail-closed.

`contracts/policy.json` ships with toolgate; TOOLGATE_POLICY_FILE replaces it. A document
that does not validate against `policy.schema.json` stops the worker at start. A call is
allowed only when no rule denies it; a rule whose conditions all hold applies. Budgets are
per side-effect dimension, per run and per tenant per UTC day; critical mutations have none
unless a tenant is granted some. Rate limits are the contract's own (per tenant and tool)
unless the policy grants a tenant another window for a tool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.contract import Contract

DIMENSIONS = ("read", "write", "external_action", "financial", "critical_mutation")

# What each side-effect class spends; a contract's binding may name more (`budget`).
CLASS_DIMENSIONS = {
    "READ_ONLY": ("read",),
    "EPHEMERAL_WRITE": ("write",),
    "LOW_RISK_INTERNAL": ("write",),
    "MEDIUM_RISK_WRITE": ("write",),
    "HIGH_RISK_EXTERNAL": ("external_action",),
    "CRITICAL_MUTATION": ("critical_mutation",),
}

_SCHEMA = Draft202012Validator(
    json.loads(resources.files("toolgate.contracts").joinpath("policy.schema.json").read_text())
)


@dataclass(frozen=True)
class Policy:
    document: dict[str, Any]

    @property
    def rules(self) -> list[dict[str, Any]]:
        return list(self.document["rules"])

    def limit(self, tenant: str, scope: str, dimension: str) -> int:
        """The budget of `dimension` for `scope` ('per_run' or 'per_tenant_per_day')."""
        granted = self.document["budgets"].get("grants", {}).get(tenant, {}).get(scope, {})
        if dimension in granted:
            return int(granted[dimension])
        return int(self.document["budgets"][scope].get(dimension, 0))

    def rate_limit(self, tenant: str, contract: Contract) -> dict[str, int]:
        """The rate window for `tenant` calling `contract`: a grant in the policy, else the contract's own."""
        granted = self.document.get("rate_limits", {}).get("grants", {}).get(tenant, {}).get(contract.name)
        return dict(granted or contract.document["runtime"]["rate_limits"])

    @property
    def repair(self) -> dict[str, int]:
        return {"max_attempts_per_operation": 3, "budget_per_run": 50, **self.document.get("repair", {})}


def dimensions(contract: Contract) -> tuple[str, ...]:
    named = tuple(contract.binding.get("budget", ()))
    return tuple(dict.fromkeys((*CLASS_DIMENSIONS.get(contract.side_effect_class, ()), *named)))


def admit(document: Any, source: str) -> Policy:
    problems = [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in _SCHEMA.iter_errors(document)
    ]
    if problems:
        raise ContractRefused(f"{source}: policy refused: " + "; ".join(problems))
    for rule in document["rules"]:
        if rule["effect"] == "require_approvals" and "approvals" not in rule:
            raise ContractRefused(f"{source}: rule {rule['id']} requires approvals but says not how many")
    return Policy(document)


def load_policy(path: Path | None = None) -> Policy:
    if path is None:
        text = resources.files("toolgate.contracts").joinpath("policy.json").read_text()
        return admit(json.loads(text), "contracts/policy.json")
    return admit(json.loads(path.read_text()), str(path))


def refuse_unenforced_rules(policy: Policy, source: str) -> None:
    """Raise ContractRefused when `policy` has JSON rules the shipped document does not: the policy
    stage decides with Cedar (contracts/cedar/, TOOLGATE_POLICY_DIR) and would ignore them, and a
    deny rule ignored fails open."""
    shipped = load_policy().rules
    ignored = [str(rule["id"]) for rule in policy.rules if rule not in shipped]
    if ignored:
        raise ContractRefused(
            f"{source}: policy refused: rules {', '.join(ignored)} would not be enforced: the policy stage "
            "decides with Cedar policies (TOOLGATE_POLICY_DIR); write them in Cedar and remove them here"
        )
