"""The policy gates, in the seeds' order: IAM and tenant scope, quarantine, policy rules,
state consistency, confirmation, budgets and rate limits.

A pure function of the call, its contract, Cedar's verdict on it, the budgets, the facts read
about the resources the call names, the usage counted so far, the time and the environment. It is
fail-closed: a call passes only when every gate lets it.

Each gate is a function of the `Case` (case.py) that returns the outcome ending the decision,
or None to let the next gate decide; `GATES` lists them in order. The identity and resource
gates are here, the policy rules and approvals in rules.py, budgets and rate limits in
budgets.py, value budgets in values.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolgate.contracts.budgets import Budgets, dimensions
from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.taxonomy import TOOL_QUARANTINED
from toolgate.workers.policy.budgets import budgets, rate_limit, standing
from toolgate.workers.policy.case import Allow, Case, Deny, Gate, Permit, Recent, Usage, Verdict, deny
from toolgate.workers.policy.rules import MIN_APPROVALS, policy_rules, required_approvals, side_effect_class
from toolgate.workers.policy.values import value_budgets, value_standing, values_spent
from toolgate.workers.runtime.facts import Facts, Row, owned

__all__ = ["GATES", "MIN_APPROVALS", "Allow", "Deny", "Recent", "Usage", "decide", "quarantine", "refs"]


def scopes(case: Case) -> Deny | None:
    """6. IAM: the caller's scopes must cover the tool's (caller scopes ∩ required = required)."""
    contract = case.contract
    granted = set(case.record.call.principal.scopes)
    missing = [s for s in contract.required_scopes if s not in granted]
    if not missing:
        return None
    return deny(
        TaxonomyClass.PERMISSION_DENIED,
        "missing_scope",
        f"{contract.name} needs scopes {', '.join(contract.required_scopes)}",
        field="principal.scopes",
        expected=", ".join(contract.required_scopes),
        actual="missing " + ", ".join(missing),
    )


def tenant_scope(case: Case) -> Deny | None:
    """6. Tenant scope: every resource the arguments name must be this tenant's. Another
    tenant's is answered exactly as one that does not exist (only the audit log tells them
    apart). Fail closed: a tenant-bound argument that is absent, null or not an id names no
    resource this gate could check, and is refused (admission makes every one required)."""
    record = case.record
    for binding in case.contract.binding.get("tenant_binding", []):
        value = record.call.arguments.get(binding["argument"])
        if not isinstance(value, str):
            return deny(
                TaxonomyClass.PERMISSION_DENIED,
                "not_a_resource_id",
                f"{binding['argument']} must name a resource of your tenant by its id",
                field=binding["argument"],
                expected="an id (a string)",
            )
        rows = case.facts.get((binding["lookup"], value))
        if owned(rows, record.call.tenant_id) is None:
            return deny(
                TaxonomyClass.STALE_STATE,
                "resource_missing",
                f"{binding['argument']} {value} does not exist in your tenant; refresh state and re-plan",
                field=binding["argument"],
                actual=value,
                finding="cross_tenant" if rows else "resource_missing",
            )
    return None


def quarantine(case: Case) -> Deny | None:
    """A tool version quarantined (a READ_ONLY tool caught writing, or an operator's hold) runs
    no call, a retry of one counted before included, until an operator releases it."""
    call = case.record.call
    if (call.tool_name, call.tool_version) not in case.quarantined:
        return None
    return deny(
        TaxonomyClass.POLICY_VIOLATION,
        TOOL_QUARANTINED,
        f"{call.tool_name} {call.tool_version} is quarantined until an operator reviews and releases it "
        "(a tool declared READ_ONLY that tried to write, or an operator's hold); no call of it runs meanwhile",
        field="tool_version",
        actual=f"{call.tool_name}@{call.tool_version}",
        finding="quarantined",
    )


def counted_before(case: Case) -> Allow | None:
    """A retry of an operation that passed every gate below before (its usage event was
    recorded) goes on as it is: execution answers it from its key (a replay, or the same
    operation resumed under its approval), not from today's state, which its own effect may
    have changed (a charge settles its invoice). One whose value was released without its
    operation ending (its approval denied or expired) is judged again: it may run, and reserves
    its value again (workers/policy/values.py)."""
    if case.event_id not in case.usage.counted or case.event_id in case.usage.released:
        return None
    return Allow(required_approvals(case), ())


def state_consistency(case: Case) -> Deny | None:
    """8. The target exists, is in a state the call may act on, and has not changed since the
    agent saw it."""
    arguments = case.record.call.arguments
    for check in case.contract.binding.get("state_checks", []):
        argument = check["fact"]["argument"]
        value = arguments.get(argument)
        fact = case.facts.get((check["fact"]["lookup"], value)) if isinstance(value, str) else None
        row = owned(fact, case.record.call.tenant_id)
        if row is None:
            return deny(
                TaxonomyClass.STALE_STATE,
                "resource_missing",
                f"{argument} {value} does not exist; refresh state",
                field=argument,
                actual=str(value),
            )
        denied = _required_state(case, check, argument, value, row) or _unchanged(check, argument, value, row, case)
        if denied is not None:
            return denied
    return None


def _required_state(case: Case, check: Mapping[str, Any], argument: str, value: Any, row: Row) -> Deny | None:
    for column, allowed in check.get("require", {}).items():
        if row.get(column) not in allowed:
            return deny(
                TaxonomyClass.STALE_STATE,
                "wrong_state",
                f"{argument} {value} is {row.get(column)}; {case.contract.name} needs {column} in {allowed}",
                field=argument,
                expected=f"{column} in {allowed}",
                actual=f"{column} {row.get(column)}",
            )
    return None


def _unchanged(check: Mapping[str, Any], argument: str, value: Any, row: Row, case: Case) -> Deny | None:
    arguments = case.record.call.arguments
    for arg, column in check.get("match", {}).items():
        if arguments.get(arg) != row.get(column):
            return deny(
                TaxonomyClass.STALE_STATE,
                "changed",
                f"{argument} {value} has {column} {row.get(column)} now, "
                f"not {arguments.get(arg)}: refresh state and re-plan",
                field=arg,
                expected=str(row.get(column)),
                actual=str(arguments.get(arg)),
            )
    return None


# The gates in the seeds' order; the first outcome wins.
GATES: tuple[Gate, ...] = (
    scopes,
    tenant_scope,
    quarantine,
    side_effect_class,
    policy_rules,
    counted_before,
    state_consistency,
    budgets,
    value_budgets,
    rate_limit,
)


def decide(
    record: StageRecord,
    contract: Contract,
    policy: Budgets,
    facts: Facts,
    usage: Usage,
    event_id: str,
    now_ms: int,
    environment: str,
    quarantined: frozenset[tuple[str, str]] = frozenset(),
    *,
    verdict: Verdict,
) -> Allow | Deny:
    """Allow the call only when every gate lets it (fail closed); `quarantined`: the (tool,
    version) pairs no call may run; `verdict`: Cedar's on the call (workers/policy/cedar.py)."""
    case = Case(record, contract, policy, facts, usage, event_id, now_ms, environment, verdict, quarantined)
    for gate in GATES:
        outcome = gate(case)
        if outcome is not None:
            return outcome
    groups = verdict.groups if isinstance(verdict, Permit) else ()
    if record.call.dry_run:  # spends nothing; its preview says where the real call would leave each budget
        return Allow(required_approvals(case), (), standing(case) + value_standing(case), groups, ())
    return Allow(required_approvals(case), dimensions(contract), (), groups, values_spent(case))


def refs(record: StageRecord, contract: Contract) -> list[tuple[str, Any]]:
    """(lookup, id) for every fact the policy gates need about this call."""
    binding = contract.binding
    found = [(b["lookup"], record.call.arguments.get(b["argument"])) for b in binding.get("tenant_binding", [])]
    found += [
        (c["fact"]["lookup"], record.call.arguments.get(c["fact"]["argument"])) for c in binding.get("state_checks", [])
    ]
    return found
