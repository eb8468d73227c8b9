"""Value budgets (gate 10, issue 51 part 2): the value a call would spend (contracts/values.py:
money by currency, e-mail recipients), against the policy set's value limits for its run and
its tenant's UTC day (budgets.json `value_budgets`). Pure.

A dimension no limit names has no value budget. The value reserved so far is `Usage.value_run`
and `Usage.value_day`: read in the round's transaction under the tenant's lock (store/values.py),
and kept current through the round as calls are allowed (round_decisions.py), so the round's
calls spend in order."""

from __future__ import annotations

from toolgate.contracts.values import spent_values
from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.policy.case import Case, Deny, Values, deny, run_of

SCOPES = ("per_run", "per_tenant_per_day")


def values_spent(case: Case) -> Values:
    """(value dimension, amount) the call spends, in the order its contract derives them."""
    return tuple(spent_values(case.contract, case.record.call.arguments).items())


def _value_lines(case: Case) -> list[tuple[str, str, int, int, int]]:
    """(dimension, scope, reserved so far, this call's amount, limit) for every value budget the
    call would spend."""
    tenant = case.record.call.tenant_id
    lines = []
    for dim, amount in values_spent(case):
        for scope in SCOPES:
            limit = case.policy.value_limit(tenant, scope, dim)
            if limit is None:
                continue
            if scope == "per_run":
                used = case.usage.value_run.get((*run_of(case.record), dim), 0)
            else:
                used = case.usage.value_day.get((tenant, dim), 0)
            lines.append((dim, scope, used, amount, limit))
    return lines


def value_budgets(case: Case) -> Deny | None:
    """10. Value budgets: refused when the call's value would take a budget over its limit (a
    retried operation reserved its value when it first passed: counted_before, above)."""
    for dim, scope, used, amount, limit in _value_lines(case):
        if used + amount > limit:
            return deny(
                TaxonomyClass.BUDGET_EXHAUSTED,
                f"budget.{dim}",
                f"the {dim} budget {scope.replace('_', ' ')} would be exceeded: {used} of {limit} "
                f"is spent, and this call would spend {amount}",
                field=None,
                expected=f"at most {limit - used}",
                actual=str(amount),
            )
    return None


def value_standing(case: Case) -> tuple[str, ...]:
    """Where the call leaves each value budget it spends (shown in a dry run's preview)."""
    return tuple(f"{dim} {scope}: {used + amount} of {limit}" for dim, scope, used, amount, limit in _value_lines(case))
