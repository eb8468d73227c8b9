"""The budgets beside a Cedar policy set: limits per side-effect dimension, rate-limit grants and
the repair loop's limits, as data, admitted at start.

`budgets.json` sits in the policy set's directory (TOOLGATE_POLICY_DIR; the shipped
`contracts/cedar/budgets.json` by default) and is validated against `budgets.schema.json` when a
worker starts: a document that does not validate, or a directory without one, stops the worker.
Budgets are per side-effect dimension, per run and per tenant per UTC day; critical mutations
have none unless a tenant is granted some. Value budgets (`value_budgets`) limit the sums of what
the contracts derive from the arguments (contracts/values.py: money by currency, recipients), per
run and per tenant per UTC day; a value dimension no limit names has none. Rate limits are the
contract's own (per tenant and tool) unless a tenant is granted another window for a tool. (The
rules are the set's Cedar policies: contracts/cedar_policy.py. A JSON policy document of the older format, rules and
budgets together, is refused here; `toolgate policy convert` splits it.)
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

BUDGETS_FILE = "budgets.json"
_SCHEMA = Draft202012Validator(
    json.loads(resources.files("toolgate.contracts").joinpath("budgets.schema.json").read_text())
)


@dataclass(frozen=True)
class Budgets:
    document: dict[str, Any]

    def limit(self, tenant: str, scope: str, dimension: str) -> int:
        """The budget of `dimension` for `scope` ('per_run' or 'per_tenant_per_day')."""
        granted = self.document["budgets"].get("grants", {}).get(tenant, {}).get(scope, {})
        if dimension in granted:
            return int(granted[dimension])
        return int(self.document["budgets"][scope].get(dimension, 0))

    def value_limit(self, tenant: str, scope: str, dimension: str) -> int | None:
        """The value budget of `dimension` (e.g. 'money:USD') for `scope`; None: no limit is named."""
        values = self.document.get("value_budgets", {})
        granted = values.get("grants", {}).get(tenant, {}).get(scope, {})
        if dimension in granted:
            return int(granted[dimension])
        limit = values.get(scope, {}).get(dimension)
        return None if limit is None else int(limit)

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


def admit(document: Any, source: str) -> Budgets:
    """`document` admitted as budgets, or ContractRefused naming every problem."""
    if isinstance(document, dict) and "rules" in document:
        raise ContractRefused(
            f"{source}: budgets refused: it has JSON policy rules, which no stage enforces any more: "
            "`toolgate policy convert` writes them as Cedar policies and the rest as budgets.json"
        )
    problems = [
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in _SCHEMA.iter_errors(document)
    ]
    if problems:
        raise ContractRefused(f"{source}: budgets refused: " + "; ".join(problems))
    return Budgets(document)


def admit_budgets_text(source: str, text: str) -> Budgets:
    """Budgets from the text of a budgets.json, or ContractRefused."""
    try:
        return admit(json.loads(text), source)
    except json.JSONDecodeError as exc:
        raise ContractRefused(f"{source}: budgets refused: not JSON: {exc}") from exc


def budgets_file(directory: Path | None = None) -> tuple[str, str]:
    """(source, text) of the budgets.json of the set in `directory` (the shipped `contracts/cedar/`
    by default); ContractRefused when the directory has none."""
    if directory is None:
        text = resources.files("toolgate.contracts").joinpath("cedar", BUDGETS_FILE).read_text()
        return f"contracts/cedar/{BUDGETS_FILE}", text
    path = directory / BUDGETS_FILE
    try:
        return str(path), path.read_text()
    except OSError as exc:
        missing = f"{path}: budgets refused: a policy set's directory holds its budgets.json"
        raise ContractRefused(f"{missing} ({exc})") from exc


def load_budgets(directory: Path | None = None) -> Budgets:
    """The budgets of the policy set in `directory` (the shipped `contracts/cedar/` by default)."""
    return admit_budgets_text(*budgets_file(directory))
