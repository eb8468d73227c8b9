"""Budgets and rate limits (gate 10): the usage a call would add, against the policy's limits
for its tenant and run (a run is its agent's own: case.run_of)."""

from __future__ import annotations

from toolgate.contracts.budgets import dimensions
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.policy.case import Case, Deny, Recent, deny, run_of


def _budget_lines(case: Case) -> list[tuple[str, str, int, int]]:
    """(dimension, scope, used so far, limit) for every budget the call would spend."""
    record = case.record
    lines = []
    for dim in dimensions(case.contract):
        for scope, used in (
            ("per_run", case.usage.per_run.get((*run_of(record), dim), 0)),
            ("per_tenant_per_day", case.usage.per_day.get((record.call.tenant_id, dim), 0)),
        ):
            lines.append((dim, scope, used, case.policy.limit(record.call.tenant_id, scope, dim)))
    return lines


def budgets(case: Case) -> Deny | None:
    """10. Budgets (a retried operation was counted when it first passed, above); a dry run is
    checked like the real call would be, and spends nothing."""
    for dim, scope, used, limit in _budget_lines(case):
        if used >= limit:
            granted = "" if limit or dim != "critical_mutation" else " (none is granted to this tenant)"
            return deny(
                TaxonomyClass.BUDGET_EXHAUSTED,
                f"budget.{dim}",
                f"the {dim.replace('_', ' ')} budget {scope.replace('_', ' ')} is spent: {used} of {limit}{granted}",
                field=None,
                expected=f"at most {limit}",
                actual=str(used + 1),
            )
    return None


def standing(case: Case) -> tuple[str, ...]:
    """Where the call leaves each budget it spends (shown in a dry run's preview)."""
    return tuple(f"{dim} {scope}: {used + 1} of {limit}" for dim, scope, used, limit in _budget_lines(case))


def rate_limit(case: Case) -> Deny | None:
    """10. Rate limits: the tenant's calls of this tool within the window; the oldest call
    leaving the window frees a place."""
    window = case.policy.rate_limit(case.record.call.tenant_id, case.contract)
    recent = case.usage.rate.get((case.record.call.tenant_id, case.record.call.tool_name), Recent())
    if recent.count < window["max_requests"]:
        return None
    retry_after = (recent.oldest_ms or case.now_ms) + window["window_sec"] * 1000 - case.now_ms
    return deny(
        TaxonomyClass.RATE_LIMITED,
        "rate_limited",
        f"{case.contract.name} allows {window['max_requests']} calls per "
        f"{window['window_sec']} s per tenant; retry in {retry_after} ms",
        retry_after_ms=max(retry_after, 1),
    )
