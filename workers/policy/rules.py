"""Policy rules (gate 7) and the approvals a call needs (9): fail closed on a side-effect class
no policy covers, refuse on the first deny rule that applies, and otherwise ask for the most
approvals the class, the contract or an applying rule requires."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

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


def _applying_rules(case: Case) -> list[Mapping[str, Any]]:
    return [rule for rule in case.policy.rules if _applies(rule["when"], case)]


def policy_rules(case: Case) -> Deny | None:
    """7. Policy rules: the first deny rule that applies to the call refuses it; under a Cedar
    policy set, Cedar's verdict (a forbid, or no permit) refuses it instead."""
    if case.verdict is not None:
        return case.verdict if isinstance(case.verdict, Deny) else None
    for rule in _applying_rules(case):
        if rule["effect"] == "deny":
            return deny(TaxonomyClass.POLICY_VIOLATION, f"policy.{rule['id']}", rule["message"], rule=rule["id"])
    return None


def required_approvals(case: Case) -> int:
    """9. Confirmation: the most approvals the side-effect class, the contract or an applying
    rule asks for; the approval-wait stage collects them."""
    approvals = max(MIN_APPROVALS[case.contract.side_effect_class], case.contract.required_approvals)
    if isinstance(case.verdict, Permit):  # Cedar's permits say it in their @approvals
        return max(approvals, case.verdict.approvals)
    for rule in _applying_rules(case):
        if rule["effect"] != "deny":
            approvals = max(approvals, int(rule["approvals"]))
    return approvals


def _applies(when: Mapping[str, Any], case: Case) -> bool:
    security = case.contract.document["security"]
    checks = {
        "tool": case.record.call.tool_name,
        "side_effect_class": case.contract.side_effect_class,
        "data_classification": security["data_classification"],
        "egress_policy": security["egress_policy"],
        "environment": case.environment,
        "tenant": case.record.call.tenant_id,
    }
    for key, allowed in when.items():
        if key == "outside_hours_utc":
            if not _outside(str(allowed), case.now_ms):
                return False
        elif checks[key] not in allowed:
            return False
    return True


def _outside(window: str, now_ms: int) -> bool:
    start, end = window.split("-")
    now = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).strftime("%H:%M")
    return not (start <= now < end)
