"""Policy rules (gate 7) and the approvals a call needs (9): fail closed on a side-effect class
no policy covers, refuse where Cedar's verdict does (a forbid applied, or no permit did), and
otherwise ask for the most approvals the class, the contract or an applying permit requires."""

from __future__ import annotations

from toolgate.schemas.models import TaxonomyClass
from toolgate.workers.policy.case import Case, Deny, Permit, deny

# The least approval each side-effect class needs, whatever its contract says.
MIN_APPROVALS = {
    "READ_ONLY": 0,
    "EPHEMERAL_WRITE": 0,
    "LOW_RISK_INTERNAL": 0,
    "MEDIUM_RISK_WRITE": 0,
    "HIGH_RISK_EXTERNAL": 1,
    "CRITICAL_MUTATION": 2,
}


def side_effect_class(case: Case) -> Deny | None:
    """7. Policy, fail closed: a side-effect class no policy covers is refused."""
    side_effect = case.contract.side_effect_class
    if side_effect in MIN_APPROVALS:
        return None
    return deny(
        TaxonomyClass.POLICY_VIOLATION,
        "unknown_side_effect_class",
        f"no policy covers side-effect class {side_effect}; refusing",
        actual=side_effect,
    )


def policy_rules(case: Case) -> Deny | None:
    """7. Policy rules: Cedar's verdict on the call (workers/policy/cedar.py, judged for the whole
    round before the gates run) refuses it where a forbid applied or no permit did."""
    return case.verdict if isinstance(case.verdict, Deny) else None


def required_approvals(case: Case) -> int:
    """9. Confirmation: the most approvals the side-effect class, the contract or an applying
    permit (its @approvals) asks for; the approval-wait stage collects them. The class's and the
    contract's are floors: a policy can ask for more, never fewer."""
    approvals = max(MIN_APPROVALS[case.contract.side_effect_class], case.contract.required_approvals)
    return max(approvals, case.verdict.approvals) if isinstance(case.verdict, Permit) else approvals
