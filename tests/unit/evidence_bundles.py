"""Evidence bundles (docs/evidence.md) made with toolgate's own signing functions and fixed keys,
for the tests of `toolgate evidence verify` (ops/evidence_checks/): an approved, executed charge
(2 of 2 finance directors, its proposal signed in a batch under a Merkle root, its observation
sealed alone) and a charge the policy refused (its proposal signed alone, its observation sealed
in a round of two). The policy decision is the one the policy stage's own record builder writes
(workers/policy/witness.py, through tests/unit/test_decision_record.py `written_round`), so the
verifier can make it again with the shipped contracts and policy set."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.unit.factories import principal, proposal, registry, stage_record
from tests.unit.test_cedar_policy import NOON
from tests.unit.test_decision_record import shipped_set, written_round
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision, Verdict
from toolgate.store.audit_entry import GENESIS, Entry, chain_hash
from toolgate.store.rows import Decided
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST, TENANT_ID
from toolgate.trust import proposal_signing, signing
from toolgate.trust.deployment_keys import key_id_of
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.edge_signing import KEY_HEADER, PROOF_HEADER, ROOT_PURPOSE, SIGNATURE_HEADER, edge_signed_bytes
from toolgate.trust.log_tree import CompactRange, Known
from toolgate.trust.merkle import leaf_hash, merkle_tree, signed_root
from toolgate.trust.signed_note import COSIGNATURE_V1, Note, cosign, sign, vkey
from toolgate.trust.tlog_checkpoint import TreeHead
from toolgate.workers.validation import recorded

AGENT, AGENT_KEY_ID = PrivateKey(b"\x11" * 32), "ak_agent_1"
DEPLOYMENT = PrivateKey(b"\x22" * 32)
DEPLOYMENT_KEY_ID = key_id_of(DEPLOYMENT.public.raw)
WITNESS, WITNESS_NAME = PrivateKey(b"\x33" * 32), "witness.example/w1"
APPROVERS = {
    name: Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for n, name in ((0x44, "alice"), (0x55, "bob"))
}
ORIGIN = "toolgate/audit"
TOOL, VERSION = "payment.charge_card", "1.0.0"
APPROVAL_ID, STATE_VERSION, GROUP, RISK = "apr_1", "v7", "finance-directors", "CRITICAL_MUTATION"
OTHERS = 5  # audit rows of other calls before the call's own


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def at(ms: int) -> str:
    """A time as the audit log hashes it: RFC 3339 UTC with microseconds."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def approved() -> dict[str, Any]:
    """The bundle of an approved, executed charge of 6,000 USD."""
    arguments = {"invoice_id": "inv_acme0001", "amount_cents": 600_000, "currency": "USD"}
    bundle, call = _common(arguments, batched=True)
    bundle["approval"] = _approval(call["payload_hash"])
    bundle["execution"] = {
        "idempotency_key": call["idempotency_key"],
        "request_hash": call["request_hash"],
        "status": "COMPLETED",
        "call_id": "call_1",
        "attempt": 1,
        "response": {"charge_id": "ch_1"},
        "error_code": None,
        "created_at": at(NOON + 120_000),
        "completed_at": at(NOON + 121_000),
    }
    rows = [
        ("policy", "allowed", {"approvals": 2}),
        ("approval-wait", "decision_counted", {"approver": "alice"}),
        ("approval-wait", "decision_counted", {"approver": "bob"}),
        ("execution", "executed", {"status": "COMPLETED", "tool": TOOL}),
    ]
    bundle["audit"] = _audit(rows)
    bundle["observations"] = _observations(call["proposal_digest"], alone=True)
    return bundle


def refused() -> dict[str, Any]:
    """The bundle of a charge of 11,000 USD the policy refused (over the hard limit)."""
    arguments = {"invoice_id": "inv_acme0001", "amount_cents": 1_100_000, "currency": "USD"}
    bundle, call = _common(arguments, batched=False)
    bundle["audit"] = _audit([("policy", "refused", {"taxonomy": "POLICY_VIOLATION"})])
    bundle["observations"] = _observations(call["proposal_digest"], alone=False)
    return bundle


def _common(arguments: dict[str, Any], batched: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bundle's proposal, call, policy decision and keys."""
    asked = proposal(TOOL, arguments, tool_version=VERSION, created_at_ms=NOON - 1000)
    if batched:
        other = proposal(TOOL, {**arguments, "invoice_id": "inv_acme0002"}, tool_version=VERSION, call_id="call_2")
        (signed, digest), _ = proposal_signing.sign_all([asked, other], AGENT_KEY_ID, AGENT)
    else:
        signed, digest = proposal_signing.signed_with_digest(asked, AGENT_KEY_ID, AGENT)
    contract = registry().get(TOOL, VERSION)
    passed = recorded.passed(registry().digest, NOON - 500)
    record = stage_record(
        contract, arguments, payload_hash=payload_hash(arguments), proposal_digest=digest, decisions=[passed]
    )
    (decided,) = written_round(shipped_set(), [(record, contract, "event-1")])[1]
    call = {
        "arguments": arguments,
        "payload_hash": record.call.payload_hash,
        "proposal_digest": digest,
        "idempotency_key": record.call.idempotency_key,
        "request_hash": record.call.request_hash,
    }
    bundle = {
        "format": "toolgate.evidence/v1",
        "tenant_id": "acme",
        "call_id": "call_1",
        "made_at": at(NOON + 600_000),
        "keys": _keys(),
        "proposal": {
            "document": b64(proposal_signing.signed_bytes(signed)),
            "signature": b64(signed.signature or b""),
            "proof": None if signed.signature_proof is None else b64(signed.signature_proof),
            "arguments": signed.arguments,
        },
        "call": call,
        "decisions": [_decision(decided)],
        "approval": None,
        "execution": None,
    }
    return bundle, call


def _decision(row: Decided) -> dict[str, Any]:
    fields = ("stage", "outcome", "decided_at_ms", "tool_name", "tool_version", "contracts_digest", "policy_digest")
    found: dict[str, Any] = {name: getattr(row, name) for name in fields}
    found.update(
        taxonomy_class=row.taxonomy_class,
        code=row.code,
        rule=row.rule,
        approvals=row.approvals,
        approver_groups=row.approver_groups,
        call=None,
        facts=row.facts,
        usage=row.usage,
        record=None if row.record is None else b64(row.record),
    )
    return found


def _keys() -> dict[str, Any]:
    user = principal()
    return {
        "deployment": [{"key_id": DEPLOYMENT_KEY_ID, "public_key": b64(DEPLOYMENT.public.raw)}],
        "agent": {
            "agent_id": user.agent_id,
            "key_id": AGENT_KEY_ID,
            "public_key": b64(AGENT.public.raw),
            "status": "active",
            "registered_at": at(NOON - 86_400_000),
            "revoked_at": None,
        },
        "approvers": [
            {
                "approver_id": name,
                "public_key": b64(signing.public_bytes(key)),
                "groups": [GROUP],
                "risk_classes": [RISK],
                "tenants": ["acme"],
                "status": "active",
                "registered_at": at(NOON - 86_400_000),
                "revoked_at": None,
            }
            for name, key in sorted(APPROVERS.items())
        ],
        "witnesses": [{"name": WITNESS_NAME, "vkey": vkey(WITNESS_NAME, COSIGNATURE_V1, WITNESS.public.raw)}],
    }


def _approval(hashed: str) -> dict[str, Any]:
    decisions = []
    for n, (name, key) in enumerate(sorted(APPROVERS.items())):
        decided_ms = NOON + 60_000 + n * 1000
        decision = ApprovalDecision(
            decision_id=f"dec_{name}",
            approval_id=APPROVAL_ID,
            decision=Verdict.APPROVE,
            approver_id=name,
            tool_name=TOOL,
            tool_version=VERSION,
            payload_hash=hashed,
            decided_at_ms=decided_ms,
            expires_at_ms=decided_ms + 300_000,
            state_version=STATE_VERSION,
            approval_scope=signing.SINGLE_EXECUTION,
            signature=b"",
        )
        signed = signing.sign(decision, key)
        decisions.append(
            {
                "decision_id": decision.decision_id,
                "approver_id": name,
                "verdict": "APPROVE",
                "decided_at": at(decided_ms),
                "signed": b64(signing.signed_bytes(signed)),
                "signature": b64(signed.signature),
            }
        )
    ticket = {
        "approval_id": APPROVAL_ID,
        "tool_name": TOOL,
        "tool_version": VERSION,
        "payload_hash": hashed,
        "state_version": STATE_VERSION,
        "risk_class": RISK,
        "required_approvals": 2,
        "distinct_approvers": True,
        "approver_groups": [GROUP],
        "status": "APPROVED",
        "created_at": at(NOON + 1000),
        "expires_at": at(NOON + 3_600_000),
        "decided_at": at(NOON + 61_000),
        "consumed_by": "call_1",
        "packet": {"approval_id": APPROVAL_ID, "state_version": STATE_VERSION},
    }
    return {"ticket": ticket, "decisions": decisions}


def _audit(mine: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """A log of OTHERS rows of another call, then the call's rows, all under one checkpoint
    signed by the deployment and cosigned by the witness."""
    entries = [Entry("policy", "allowed", "user_9", f"call_other_{i}", "acme", {"i": i}) for i in range(OTHERS)]
    entries += [Entry(stage, action, "user_1", "call_1", "acme", detail) for stage, action, detail in mine]
    prev, rows = GENESIS, []
    for index, entry in enumerate(entries):
        when = at(NOON + index * 10_000)
        digest = chain_hash(prev, when, entry)
        rows.append(
            {"id": index + 1, "leaf_index": index, "at": when, **vars(entry), "prev_hash": prev, "hash": digest}
        )
        prev = digest
    tree = Known(CompactRange(0), [bytes.fromhex(r["hash"]) for r in rows])
    text = TreeHead(ORIGIN, tree.size, tree.root()).text()
    note = sign(text, ORIGIN, DEPLOYMENT)
    note = Note(note.text, (*note.signatures, cosign(text, WITNESS_NAME, WITNESS, NOON // 1000 + 700)))
    own = [{**r, "inclusion": [h.hex() for h in tree.inclusion(r["leaf_index"])]} for r in rows[OTHERS:]]
    checkpoint = {
        "note": str(note),
        "tree_size": tree.size,
        "root_hash": tree.root().hex(),
        "key_id": DEPLOYMENT_KEY_ID,
    }
    return {"rows": own, "checkpoint": checkpoint, "uncovered": 0}


def _observations(digest: str, alone: bool) -> list[dict[str, Any]]:
    """The call's observation as normalization seals it: alone, or in a round with another call's."""
    topic = "tool.observations.acme"
    mine = (
        b"run_1",
        b'{"call_id": "call_1"}',
        [(CALL_ID, b"call_1"), (TENANT_ID, b"acme"), (PROPOSAL_DIGEST, digest.encode())],
    )
    other = (b"run_2", b'{"call_id": "call_2"}', [(CALL_ID, b"call_2"), (TENANT_ID, b"acme")])
    records = [mine] if alone else [mine, other]
    named = (KEY_HEADER, DEPLOYMENT_KEY_ID.encode())
    messages = [edge_signed_bytes(topic, key, [*headers, named], value) for key, value, headers in records]
    if alone:
        seals = [[(SIGNATURE_HEADER, DEPLOYMENT.sign(messages[0]))]]
    else:
        root, proofs = merkle_tree([leaf_hash(m) for m in messages])
        signature = DEPLOYMENT.sign(signed_root(ROOT_PURPOSE, root))
        seals = [[(SIGNATURE_HEADER, signature), (PROOF_HEADER, proof)] for proof in proofs]
    key, value, headers = records[0]
    sealed = [*headers, named, *seals[0]]
    return [
        {
            "topic": topic,
            "key": b64(key),
            "value": b64(value),
            "headers": [[name, None if raw is None else b64(raw)] for name, raw in sealed],
            "at": at(NOON + 122_000),
            "decoded": json.loads(value),
        }
    ]
