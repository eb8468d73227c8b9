"""The policy gates, in the seeds' order: IAM and tenant scope, policy rules, state
consistency, confirmation, budgets and rate limits.

A pure function of the call, its contract, the policy document, the facts read about the
resources the call names, the usage counted so far, the time and the environment. It is
fail-closed: a call passes only when every gate lets it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolgate.contracts.policy import Policy, dimensions
from toolgate.contracts.registry import Contract
from toolgate.schemas.models import FieldError, StageRecord
from toolgate.taxonomy import Taxonomy
from toolgate.workers.runtime.facts import Facts, owned

# The least approval each side-effect class needs, whatever its contract says.
MIN_APPROVALS = {
    "READ_ONLY": 0,
    "EPHEMERAL_WRITE": 0,
    "LOW_RISK_INTERNAL": 0,
    "MEDIUM_RISK_WRITE": 0,
    "HIGH_RISK_EXTERNAL": 1,
    "CRITICAL_MUTATION": 2,
}


@dataclass
class Recent:
    """The calls inside a tenant's rate window for a tool: how many, and when the oldest was made."""

    count: int = 0
    oldest_ms: int | None = None


@dataclass
class Usage:
    """Counts of usage events, kept current through a round as calls are allowed."""

    per_run: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (tenant, run, dimension)
    per_day: dict[tuple[str, str], int] = field(default_factory=dict)  # (tenant, dimension)
    rate: dict[tuple[str, str], Recent] = field(default_factory=dict)  # (tenant, tool)
    counted: set[str] = field(default_factory=set)  # operations (event ids) already counted

    def record(self, record: StageRecord, event_id: str, spends: tuple[str, ...], now_ms: int) -> None:
        for dim in spends:
            key = (record.tenant_id, record.run_id, dim)
            self.per_run[key] = self.per_run.get(key, 0) + 1
            self.per_day[(record.tenant_id, dim)] = self.per_day.get((record.tenant_id, dim), 0) + 1
        recent = self.rate.setdefault((record.tenant_id, record.tool_name), Recent())
        recent.count += 1
        recent.oldest_ms = now_ms if recent.oldest_ms is None else recent.oldest_ms
        self.counted.add(event_id)


@dataclass(frozen=True)
class Allow:
    required_approvals: int
    spends: tuple[str, ...]  # budget dimensions this call spends (empty: counted before, or dry run)
    standing: tuple[str, ...] = field(default=(), compare=False)  # where the call leaves each budget


@dataclass(frozen=True)
class Deny:
    taxonomy: Taxonomy
    errors: tuple[FieldError, ...]
    retry_after_ms: int | None = None
    rule: str | None = None
    finding: str | None = None  # for the audit log only, never the agent (e.g. cross_tenant)


def _deny(taxonomy: Taxonomy, code: str, message: str, **kw: Any) -> Deny:
    retry = kw.pop("retry_after_ms", None)
    rule = kw.pop("rule", None)
    finding = kw.pop("finding", None)
    return Deny(taxonomy, (FieldError(code=code, message=message, **kw),), retry, rule, finding)


def decide(
    record: StageRecord,
    contract: Contract,
    policy: Policy,
    facts: Facts,
    usage: Usage,
    event_id: str,
    now_ms: int,
    environment: str,
) -> Allow | Deny:
    # 6. IAM: the caller's scopes must cover the tool's (caller scopes ∩ required = required).
    missing = [s for s in contract.required_scopes if s not in set(record.principal.scopes)]
    if missing:
        return _deny(
            Taxonomy.PERMISSION_DENIED,
            "missing_scope",
            f"{contract.name} needs scopes {', '.join(contract.required_scopes)}",
            field="principal.scopes",
            expected=", ".join(contract.required_scopes),
            actual="missing " + ", ".join(missing),
        )
    # 6. Tenant scope: every resource the arguments name must be this tenant's. Another
    # tenant's is answered exactly as one that does not exist (only the audit log tells them
    # apart); an argument that names no resource is fine, one that is not an id is not.
    for binding in contract.binding.get("tenant_binding", []):
        value = record.arguments.get(binding["argument"])
        if value is None:
            continue
        if not isinstance(value, str):
            return _deny(
                Taxonomy.PERMISSION_DENIED,
                "not_a_resource_id",
                f"{binding['argument']} must name a resource of your tenant by its id",
                field=binding["argument"],
                expected="an id (a string)",
            )
        row = facts.get((binding["lookup"], value))
        if owned(row, record.tenant_id) is None:
            return _deny(
                Taxonomy.STALE_STATE,
                "resource_missing",
                f"{binding['argument']} {value} does not exist in your tenant; refresh state and re-plan",
                field=binding["argument"],
                actual=value,
                finding="resource_missing" if row is None else "cross_tenant",
            )
    # 7. Policy rules, fail closed.
    side_effect = contract.side_effect_class
    if side_effect not in MIN_APPROVALS:
        return _deny(
            Taxonomy.POLICY_VIOLATION,
            "unknown_side_effect_class",
            f"no policy covers side-effect class {side_effect}; refusing",
            actual=side_effect,
        )
    approvals = max(MIN_APPROVALS[side_effect], contract.required_approvals)
    for rule in policy.rules:
        if not _applies(rule["when"], record, contract, environment, now_ms):
            continue
        if rule["effect"] == "deny":
            return _deny(Taxonomy.POLICY_VIOLATION, f"policy.{rule['id']}", rule["message"], rule=rule["id"])
        approvals = max(approvals, int(rule["approvals"]))
    # A retry of an operation that passed every gate below before (its usage event was
    # recorded) goes on as it is: execution answers it from its key (a replay, or the same
    # operation resumed under its approval), not from today's state, which its own effect may
    # have changed (a charge settles its invoice).
    if event_id in usage.counted:
        return Allow(approvals, ())
    # 8. State consistency: the target exists, is in a state the call may act on, and has not
    # changed since the agent saw it.
    for check in contract.binding.get("state_checks", []):
        argument = check["fact"]["argument"]
        value = record.arguments.get(argument)
        row = owned(facts.get((check["fact"]["lookup"], value)) if isinstance(value, str) else None, record.tenant_id)
        if row is None:
            return _deny(
                Taxonomy.STALE_STATE,
                "resource_missing",
                f"{argument} {value} does not exist; refresh state",
                field=argument,
                actual=str(value),
            )
        for column, allowed in check.get("require", {}).items():
            if row.get(column) not in allowed:
                return _deny(
                    Taxonomy.STALE_STATE,
                    "wrong_state",
                    f"{argument} {value} is {row.get(column)}; {contract.name} needs {column} in {allowed}",
                    field=argument,
                    expected=f"{column} in {allowed}",
                    actual=f"{column} {row.get(column)}",
                )
        for arg, column in check.get("match", {}).items():
            if record.arguments.get(arg) != row.get(column):
                return _deny(
                    Taxonomy.STALE_STATE,
                    "changed",
                    f"{argument} {value} has {column} {row.get(column)} now, "
                    f"not {record.arguments.get(arg)}: refresh state and re-plan",
                    field=arg,
                    expected=str(row.get(column)),
                    actual=str(record.arguments.get(arg)),
                )
    # 9. Confirmation: decided above (approvals); the approval-wait stage collects them.
    # 10. Budgets and rate limits (a retried operation was counted when it first passed, above);
    # a dry run is checked like the real call would be, and spends nothing.
    spends = dimensions(contract)
    standing = []
    for dim in spends:
        for scope, used in (
            ("per_run", usage.per_run.get((record.tenant_id, record.run_id, dim), 0)),
            ("per_tenant_per_day", usage.per_day.get((record.tenant_id, dim), 0)),
        ):
            limit = policy.limit(record.tenant_id, scope, dim)
            if used >= limit:
                granted = "" if limit or dim != "critical_mutation" else " (none is granted to this tenant)"
                return _deny(
                    Taxonomy.BUDGET_EXHAUSTED,
                    f"budget.{dim}",
                    f"the {dim.replace('_', ' ')} budget "
                    f"{scope.replace('_', ' ')} is spent: {used} of {limit}{granted}",
                    field=None,
                    expected=f"at most {limit}",
                    actual=str(used + 1),
                )
            standing.append(f"{dim} {scope}: {used + 1} of {limit}")
    window = policy.rate_limit(record.tenant_id, contract)
    recent = usage.rate.get((record.tenant_id, record.tool_name), Recent())
    if recent.count >= window["max_requests"]:  # the oldest call leaving the window frees a place
        retry_after = (recent.oldest_ms or now_ms) + window["window_sec"] * 1000 - now_ms
        return _deny(
            Taxonomy.RATE_LIMITED,
            "rate_limited",
            f"{contract.name} allows {window['max_requests']} calls per "
            f"{window['window_sec']} s per tenant; retry in {retry_after} ms",
            retry_after_ms=max(retry_after, 1),
        )
    return Allow(approvals, () if record.dry_run else spends, tuple(standing))


def _applies(when: Mapping[str, Any], record: StageRecord, contract: Contract, environment: str, now_ms: int) -> bool:
    security = contract.document["security"]
    checks = {
        "tool": record.tool_name,
        "side_effect_class": contract.side_effect_class,
        "data_classification": security["data_classification"],
        "egress_policy": security["egress_policy"],
        "environment": environment,
        "tenant": record.tenant_id,
    }
    for key, allowed in when.items():
        if key == "outside_hours_utc":
            if not _outside(str(allowed), now_ms):
                return False
        elif checks[key] not in allowed:
            return False
    return True


def _outside(window: str, now_ms: int) -> bool:
    start, end = window.split("-")
    now = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).strftime("%H:%M")
    return not (start <= now < end)


def refs(record: StageRecord, contract: Contract) -> list[tuple[str, Any]]:
    """(lookup, id) for every fact the policy gates need about this call."""
    binding = contract.binding
    found = [(b["lookup"], record.arguments.get(b["argument"])) for b in binding.get("tenant_binding", [])]
    found += [
        (c["fact"]["lookup"], record.arguments.get(c["fact"]["argument"])) for c in binding.get("state_checks", [])
    ]
    return found
