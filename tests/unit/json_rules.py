"""The JSON policy rules toolgate enforced before its Cedar policies (0.2.0's `contracts/policy.json`
and its evaluator), kept as the oracle the Cedar rewrite and `toolgate policy convert` are judged
against: a JSON document's rules as the verdict they gave a call."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.workers.policy.case import Permit, Verdict, deny

SHIPPED: dict[str, Any] = json.loads((Path(__file__).parent / "policy-0.2.0.json").read_text())


def json_verdict(
    rules: list[Mapping[str, Any]], record: StageRecord, contract: Contract, environment: str, now_ms: int
) -> Verdict:
    """The first deny rule that applies refuses the call; otherwise it is permitted with the most
    approvals an applying rule asks for (every call no rule denied was allowed)."""
    applying = [rule for rule in rules if _applies(rule["when"], record, contract, environment, now_ms)]
    for rule in applying:
        if rule["effect"] == "deny":
            return deny(TaxonomyClass.POLICY_VIOLATION, f"policy.{rule['id']}", rule["message"], rule=rule["id"])
    approvals = max((int(r["approvals"]) for r in applying), default=0)
    return Permit(approvals, (), tuple(str(r["id"]) for r in applying))


def _applies(when: Mapping[str, Any], record: StageRecord, contract: Contract, environment: str, now_ms: int) -> bool:
    security = contract.document["security"]
    checks = {
        "tool": record.call.tool_name,
        "side_effect_class": contract.side_effect_class,
        "data_classification": security["data_classification"],
        "egress_policy": security["egress_policy"],
        "environment": environment,
        "tenant": record.call.tenant_id,
    }
    for key, allowed in when.items():
        if key == "outside_hours_utc":
            start, end = str(allowed).split("-")
            now = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).strftime("%H:%M")
            if start <= now < end:
                return False
        elif checks[key] not in allowed:
            return False
    return True
