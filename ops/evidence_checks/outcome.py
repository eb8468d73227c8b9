"""How the call ended, as the deployment proves it: `execution.once` (the idempotency key
COMPLETED, and exactly one audit row recording that completion: workers/execution/decision.py's
`executed`) and `observation.signature` (each observation as published, its seal checked by the
client's own check, toolgate/trust/edge_signing.py `EdgeVerifier`, with the trusted deployment keys,
naming this call and its proposal's digest)."""

from __future__ import annotations

from typing import Any

from toolgate.ops.evidence_checks.trust import Trust, b64, part
from toolgate.ops.evidence_checks.verdict import Check, failed, first_failure, ok, skipped
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, header
from toolgate.trust.edge_signing import EdgeVerifier

EXECUTED = "executed"  # the audit action of a key's completion (workers/execution/decision.py `action`)


def once(bundle: Any) -> Check:
    name = "execution.once"
    execution = bundle.get("execution")
    if execution is None:
        return skipped(name, "the call never reached execution (no execution in the bundle)")
    ended = execution.get("expired_from") if execution.get("status") == "EXPIRED" else execution.get("status")
    if ended != "COMPLETED":
        return failed(name, f"the idempotency key is {_status(execution)}, not COMPLETED")
    completions = [r for r in part(bundle, "audit", "rows") if r.get("action") == EXECUTED]
    if len(completions) != 1:
        return failed(name, f"{len(completions)} audit rows record the key's completion, not exactly one")
    return ok(name, f"the key completed once (audit row {completions[0].get('id')})")


def _status(execution: dict[str, Any]) -> str:
    status = str(execution.get("status"))
    return f"EXPIRED from {execution.get('expired_from')}" if status == "EXPIRED" else status


def signature(bundle: Any, trust: Trust) -> Check:
    name = "observation.signature"
    observations = bundle.get("observations") or []
    if not observations:
        return skipped(name, "the bundle holds no observations")
    verifier = EdgeVerifier([key.raw for key in trust.deployment.values()])
    digest = (bundle.get("call") or {}).get("proposal_digest")
    problems = []
    for at, seen in enumerate(observations):
        headers = [(str(k), None if v is None else b64(v, "an observation's header")) for k, v in seen["headers"]]
        key = None if seen.get("key") is None else b64(seen["key"], "an observation's key")
        value = b64(part(seen, "value"), "an observation's value")
        if not verifier.ok(str(part(seen, "topic")), key, headers, value):
            problems.append(f"observation {at} is not signed by a trusted deployment key")
        elif header(headers, CALL_ID) != bundle.get("call_id"):
            problems.append(f"observation {at} answers call {header(headers, CALL_ID)!r}, not this one")
        elif header(headers, PROPOSAL_DIGEST) != digest:
            problems.append(f"observation {at} names another proposal digest than the call's")
    fine = f"{len(observations)} observation(s) signed by the deployment{trust.pinned_note()}"
    return first_failure(name, problems, fine)
