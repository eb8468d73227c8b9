"""Test vectors for the evidence verifiers (docs/evidence.md, `toolgate.evidence/v1`), made with
toolgate's own signing code from fixed seeds: `python -m tests.evidence_vectors [DIR]` writes them
(default verifier/vectors/), one folder each, `bundle.json` and `expected.json` (the checks that
must fail, and those that must be skipped).

Two valid bundles, from one audit log of both calls, witnessed: `approved` (a charge signed by its
agent in a batch of two, approved by two approvers of the ticket's group on the target's state,
executed once, its observation sealed in a round of two) and `refused` (a proposal signed alone,
refused by policy, its observation sealed alone). `executed-unapproved`: `approved` without its
approval (policy required two; the call executed with none). `edited`: `approved` as an edited call
(docs/evidence.md, "Edited calls"), and `edited-tampered-edit-signature`. Then single-byte tamperings of `approved`: one
byte of a field's bytes (a base64 field's decoded bytes, a text's character), each naming the
checks it must fail. Ed25519 signs deterministically, so the files are the same on every run
(tests/unit/test_evidence_vectors.py checks the committed ones are what this writes).
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import ApprovalDecision, Principal, ToolProposal, Verdict
from toolgate.schemas.wire import canonical_json
from toolgate.store.audit import GENESIS, chain_hash
from toolgate.store.audit_entry import Entry
from toolgate.trust import proposal_signing, signing
from toolgate.trust.deployment_keys import key_id_of
from toolgate.trust.ed25519 import PrivateKey
from toolgate.trust.integrity import ROOT_PURPOSE, edge_signed_bytes
from toolgate.trust.log_tree import CompactRange, Known
from toolgate.trust.merkle import leaf_hash, merkle_tree, signed_root
from toolgate.trust.signed_note import COSIGNATURE_V1, cosign, sign, vkey
from toolgate.trust.tlog_checkpoint import TreeHead

OUT = Path(__file__).resolve().parents[1] / "verifier" / "vectors"
TENANT, ORIGIN, WITNESS = "acme", "toolgate/audit", "witness.example"
DEPLOYMENT = PrivateKey(bytes([1]) * 32)
AGENT = PrivateKey(bytes([2]) * 32)
APPROVERS = {name: Ed25519PrivateKey.from_private_bytes(bytes([n]) * 32) for name, n in (("alice", 3), ("bob", 4))}
WITNESS_KEY = PrivateKey(bytes([5]) * 32)
DK = key_id_of(DEPLOYMENT.public.raw)
T0 = 1_796_050_800_000  # 2026-11-30T15:00:00Z, in ms
ARGUMENTS = '{"invoice_id": "INV-7", "amount_cents": 12000, "memo": "caf\\u00e9 \\u20ac"}'
VALIDATED = {"invoice_id": "INV-7", "amount_cents": 12000, "memo": "café €", "currency": "USD", "rate": 0.125}
EDITED = {**VALIDATED, "amount_cents": 10000}  # alice's edit: charge what is owed
ALWAYS_SKIPPED = ["decisions.rederived"]
REFUSED_SKIPPED = ["approval.quorum", "approval.signatures", "approval.state_version", "execution.once"]


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def at(ms: int) -> str:
    """RFC 3339 UTC with microseconds, as the audit log hashes its timestamps."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def proposal(call_id: str, arguments: str, run: str) -> ToolProposal:
    return ToolProposal(
        call_id=call_id,
        tenant_id=TENANT,
        principal=Principal(user_id="u-1", agent_id="agent-1", scopes=["billing:write"]),
        workflow_id="wf-1",
        run_id=run,
        logical_operation_id=f"op-{call_id}",
        tool_name="billing.charge",
        tool_version="1.0.0",
        arguments=arguments,
        created_at_ms=T0,
    )


def signed_proposals() -> dict[str, tuple[ToolProposal, str]]:
    """`approved` signed in a batch of two (with a Merkle proof), `refused` alone."""
    batch = proposal_signing.sign_all(
        [proposal("call-approved", ARGUMENTS, "run-1"), proposal("call-other", '{"amount_cents": 1}', "run-1")],
        "ak-1",
        AGENT,
    )
    alone = proposal_signing.signed_with_digest(
        proposal("call-refused", '{"amount_cents": 99}', "run-2"), "ak-1", AGENT
    )
    return {"approved": batch[0], "refused": alone}


def proposal_part(signed: ToolProposal) -> dict[str, Any]:
    proof = signed.signature_proof
    return {
        "document": b64(proposal_signing.signed_bytes(signed)),
        "signature": b64(signed.signature or b""),
        "proof": None if proof is None else b64(proof),
        "arguments": signed.arguments,
    }


def decision(
    approver: str, n: int, approval_id: str = "ap-1", arguments: dict[str, Any] = VALIDATED, edited: str | None = None
) -> dict[str, Any]:
    unsigned = ApprovalDecision(
        decision_id=f"d-{n}",
        approval_id=approval_id,
        decision=Verdict.APPROVE,
        approver_id=approver,
        tool_name="billing.charge",
        tool_version="1.0.0",
        payload_hash=payload_hash(arguments),
        decided_at_ms=T0 + 60_000 * n,
        expires_at_ms=T0 + 60_000 * n + 300_000,
        state_version="v3",
        approval_scope=signing.SINGLE_EXECUTION,
        edited_arguments=edited,
        signature=b"",
    )
    signed = signing.sign(unsigned, APPROVERS[approver])
    return {
        "decision_id": signed.decision_id,
        "approver_id": approver,
        "verdict": "APPROVE",
        "decided_at": at(signed.decided_at_ms),
        "signed": b64(signing.signed_bytes(signed)),
        "signature": b64(signed.signature),
    }


def approval() -> dict[str, Any]:
    return {"ticket": ticket("ap-1", VALIDATED), "decisions": [decision("alice", 1), decision("bob", 2)]}


def ticket(approval_id: str, arguments: dict[str, Any], created_ms: int = 1_000) -> dict[str, Any]:
    return {
        "approval_id": approval_id,
        "tool_name": "billing.charge",
        "tool_version": "1.0.0",
        "payload_hash": payload_hash(arguments),
        "state_version": "v3",
        "risk_class": "high",
        "required_approvals": 2,
        "distinct_approvers": True,
        "approver_groups": ["finance"],
        "status": "APPROVED",
        "created_at": at(T0 + created_ms),
        "expires_at": at(T0 + 3_600_000),
        "decided_at": at(T0 + 120_000),
        "consumed_by": "op-call-approved",
        "packet": {"arguments": arguments, "consequence": f"charge {arguments['amount_cents']} cents to INV-7"},
    }


def edited(approved: dict[str, Any]) -> dict[str, Any]:
    """`approved` as an edited call: alice approved ap-1 with an edit (signed, on the original
    ticket, closed EDITED); the edited call's ticket ap-2 holds her vote unsigned and bob's signed.
    `call` stays the original, as policy first judged it (the call's one recorded policy decision)."""
    bundle = copy.deepcopy(approved)
    original = ticket("ap-1", VALIDATED) | {"status": "EDITED", "decided_at": at(T0 + 60_000), "consumed_by": None}
    bundle["edit"] = {"ticket": original, "decision": decision("alice", 1, edited=canonical_json(EDITED))}
    vote = {"decision_id": "d-1.edited", "approver_id": "alice", "verdict": "APPROVE", "decided_at": at(T0 + 61_000)}
    votes = [vote | {"signed": None, "signature": None}, decision("bob", 2, "ap-2", EDITED)]
    bundle["approval"] = {"ticket": ticket("ap-2", EDITED, 61_000), "decisions": votes}
    return bundle


def approver_keys() -> list[dict[str, Any]]:
    return [
        {
            "approver_id": name,
            "public_key": b64(signing.public_bytes(key)),
            "groups": ["finance"],
            "risk_classes": ["high", "medium"],
            "tenants": [TENANT],
            "status": "active",
            "registered_at": at(T0 - 86_400_000),
            "revoked_at": None,
        }
        for name, key in APPROVERS.items()
    ]


def observations(digests: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """`approved`'s observation sealed in a round with another call's (signed root, proof);
    `refused`'s alone (signed over its bytes)."""
    topic = f"tool.observations.{TENANT}"
    made: dict[str, tuple[bytes, list[tuple[str, bytes | None]], bytes]] = {}
    for name, call_id, run in (("approved", "call-approved", b"run-1"), ("other", "call-other", b"run-1")):
        made[name] = (
            run,
            headers(call_id, digests.get(name, "sha256:" + "0" * 64)),
            json.dumps({"call": call_id}).encode(),
        )
    made["refused"] = (b"run-2", headers("call-refused", digests["refused"]), b'{"call": "call-refused"}')
    messages = {name: edge_signed_bytes(topic, key, hs, value) for name, (key, hs, value) in made.items()}
    root, proofs = merkle_tree([leaf_hash(messages["approved"]), leaf_hash(messages["other"])])
    sealed = {
        "approved": [
            ("toolgate-signature", DEPLOYMENT.sign(signed_root(ROOT_PURPOSE, root))),
            ("toolgate-proof", proofs[0]),
        ],
        "refused": [("toolgate-signature", DEPLOYMENT.sign(messages["refused"]))],
    }
    return {name: [observation(topic, *made[name], sealed[name])] for name in sealed}


def headers(call_id: str, digest: str) -> list[tuple[str, bytes | None]]:
    return [
        ("call_id", call_id.encode()),
        ("tenant_id", TENANT.encode()),
        ("toolgate-proposal", digest.encode()),
        ("toolgate-key-id", DK.encode()),
    ]


def observation(
    topic: str, key: bytes, hs: list[tuple[str, bytes | None]], value: bytes, seals: list[tuple[str, bytes]]
) -> dict[str, Any]:
    return {
        "topic": topic,
        "key": b64(key),
        "value": b64(value),
        "headers": [[k, None if v is None else b64(v)] for k, v in [*hs, *seals]],
        "at": at(T0 + 130_000),
        "decoded": json.loads(value),
    }


AUDITED = [  # (ms after T0, call, stage, action, detail): the whole log, both calls and others
    (500, "call-x", "validation", "refused", {"code": "schema"}),
    (900, "call-approved", "policy", "authorized", {"rule": "charges", "approvals": 2}),
    (1_000, "call-approved", "approval-wait", "approval_requested", {"approval_id": "ap-1"}),
    (1_200, "call-refused", "policy", "refused", {"code": "over_budget", "taxonomy_class": "POLICY_DENIED"}),
    (60_000, "call-approved", "approval-wait", "decision_counted", {"approver_id": "alice"}),
    (120_000, "call-approved", "approval-wait", "decision_counted", {"approver_id": "bob"}),
    (125_000, "call-approved", "execution", "executed", {"attempt": 1, "amount": 120.0}),
    (126_000, "call-y", "execution", "executed", {"attempt": 1}),
]


def audit_log() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every row of a small audit log (chained), and its checkpoint: signed, witness-cosigned."""
    rows, prev = [], GENESIS
    for index, (ms, call_id, stage, action, detail) in enumerate(AUDITED):
        entry = Entry(
            stage=stage, action=action, actor=f"toolgate-{stage}", call_id=call_id, tenant_id=TENANT, detail=detail
        )
        row = {"id": 100 + index, "leaf_index": index, "at": at(T0 + ms), "stage": stage, "action": action}
        row |= {"actor": entry.actor, "call_id": call_id, "tenant_id": TENANT, "detail": detail, "prev_hash": prev}
        row["hash"] = prev = chain_hash(prev, row["at"], entry)
        rows.append(row)
    tree = Known(CompactRange(0), [bytes.fromhex(r["hash"]) for r in rows])
    for row in rows:
        row["inclusion"] = [h.hex() for h in tree.inclusion(row["leaf_index"])]
    note = sign(TreeHead(ORIGIN, tree.size, tree.root()).text(), ORIGIN, DEPLOYMENT)
    cosigned = note.with_lines(cosign(note.text, WITNESS, WITNESS_KEY, T0 // 1000 + 200).line())
    checkpoint = {"note": str(cosigned), "tree_size": tree.size, "root_hash": tree.root().hex(), "key_id": DK}
    return rows, checkpoint


def keys() -> dict[str, Any]:
    return {
        "deployment": [{"key_id": DK, "public_key": b64(DEPLOYMENT.public.raw)}],
        "agent": {
            "agent_id": "agent-1",
            "key_id": "ak-1",
            "public_key": b64(AGENT.public.raw),
            "status": "active",
            "registered_at": at(T0 - 86_400_000),
            "revoked_at": None,
        },
        "approvers": [],
        "witnesses": [{"name": WITNESS, "vkey": vkey(WITNESS, COSIGNATURE_V1, WITNESS_KEY.public.raw)}],
    }


def policy_decision(outcome: str, taxonomy: str | None, code: str | None, approvals: int) -> dict[str, Any]:
    return {
        "stage": "policy",
        "outcome": outcome,
        "decided_at_ms": T0 + 900,
        "tool_name": "billing.charge",
        "tool_version": "1.0.0",
        "contracts_digest": "sha256:" + "c" * 64,
        "policy_digest": "sha256:" + "p" * 64,
        "taxonomy_class": taxonomy,
        "code": code,
        "rule": "charges",
        "approvals": approvals,
        "approver_groups": ["finance"] if approvals else [],
        "call": None,
        "facts": {"invoice_status": "open"},
        "usage": {"spent_cents": 0},
        "record": None,
    }


def bundles() -> dict[str, dict[str, Any]]:
    """The two valid bundles."""
    signed = signed_proposals()
    digests = {name: digest for name, (_, digest) in signed.items()}
    sealed = observations(digests)
    rows, checkpoint = audit_log()
    made: dict[str, dict[str, Any]] = {}
    for name, call_id in (("approved", "call-approved"), ("refused", "call-refused")):
        proposed, digest = signed[name]
        arguments = VALIDATED if name == "approved" else {"amount_cents": 99, "currency": "USD"}
        made[name] = {
            "format": "toolgate.evidence/v1",
            "tenant_id": TENANT,
            "call_id": call_id,
            "made_at": at(T0 + 300_000),
            "keys": keys(),
            "proposal": proposal_part(proposed),
            "call": {
                "arguments": arguments,
                "payload_hash": payload_hash(arguments),
                "proposal_digest": digest,
                "idempotency_key": f"idem-{call_id}",
                "request_hash": "sha256:" + "e" * 64,
            },
            "decisions": [],
            "approval": None,
            "edit": None,
            "execution": None,
            "observations": sealed[name],
            "audit": {"rows": [r for r in rows if r["call_id"] == call_id], "checkpoint": checkpoint, "uncovered": 0},
        }
    made["approved"]["decisions"] = [policy_decision("allow", None, None, 2)]
    made["refused"]["decisions"] = [policy_decision("refuse", "POLICY_DENIED", "over_budget", 0)]
    made["approved"]["keys"]["approvers"] = approver_keys()
    made["approved"]["approval"] = approval()
    made["approved"]["execution"] = {
        "idempotency_key": "idem-call-approved",
        "request_hash": "sha256:" + "e" * 64,
        "status": "COMPLETED",
        "call_id": "call-approved",
        "attempt": 1,
        "response": {"charged_cents": 12000},
        "error_code": None,
        "created_at": at(T0 + 124_000),
        "completed_at": at(T0 + 125_000),
    }
    return made


def flip_b64(text: str, at_byte: int = 0) -> str:
    """One byte of a base64 field's bytes changed (its lowest bit)."""
    raw = bytearray(base64.b64decode(text))
    raw[at_byte] ^= 1
    return b64(bytes(raw))


def flip_text(text: str, old: str, new: str) -> str:
    """One character of a text changed (`old` -> `new`, both one ASCII character, first match)."""
    assert len(old) == len(new) == 1 and old in text
    return text.replace(old, new, 1)


def flip_hex(text: str) -> str:
    """The first hex digit of a hash changed."""
    return ("f" if text[0] != "f" else "e") + text[1:]


def root_changed(note: str) -> str:
    text, _, lines = note.partition("\n\n")
    origin, size, root = text.split("\n")
    return f"{origin}\n{size}\n{flip_b64(root, 5)}\n\n{lines}"


def cosignature_changed(note: str) -> str:
    head, _, last = note.rstrip("\n").rpartition("\n")
    name, encoded = last.rsplit(" ", 1)
    return f"{head}\n{name} {flip_b64(encoded, 20)}\n"


Tamper = Callable[[dict[str, Any]], None]
TAMPERINGS: dict[str, tuple[Tamper, list[str]]] = {
    "tampered-argument": (
        lambda b: b["call"]["arguments"].update(amount_cents=12001),
        ["call.payload_hash"],
    ),
    "tampered-argument-text": (
        lambda b: b["proposal"].update(arguments=flip_text(b["proposal"]["arguments"], "2", "3")),
        ["call.payload_hash", "proposal.arguments"],
    ),
    "tampered-decision-signature": (
        lambda b: b["approval"]["decisions"][0].update(
            signature=flip_b64(b["approval"]["decisions"][0]["signature"], 9)
        ),
        ["approval.quorum", "approval.signatures"],
    ),
    "tampered-state-version": (
        lambda b: b["approval"]["ticket"].update(state_version="v4"),
        ["approval.state_version"],
    ),
    "tampered-audit-row": (
        lambda b: b["audit"]["rows"][0]["detail"].update(
            rule=flip_text(b["audit"]["rows"][0]["detail"]["rule"], "c", "C")
        ),
        ["audit.rows"],
    ),
    "tampered-observation": (
        lambda b: b["observations"][0].update(value=flip_b64(b["observations"][0]["value"], 3)),
        ["observation.signature"],
    ),
    "tampered-checkpoint": (
        lambda b: b["audit"]["checkpoint"].update(note=root_changed(b["audit"]["checkpoint"]["note"])),
        ["checkpoint.cosignatures", "checkpoint.signature"],
    ),
    "tampered-checkpoint-root": (
        lambda b: b["audit"]["checkpoint"].update(root_hash=flip_hex(b["audit"]["checkpoint"]["root_hash"])),
        ["audit.inclusion", "checkpoint.signature"],
    ),
    "tampered-cosignature": (
        lambda b: b["audit"]["checkpoint"].update(note=cosignature_changed(b["audit"]["checkpoint"]["note"])),
        ["checkpoint.cosignatures"],
    ),
}


def vectors() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Each vector's name: its bundle and its expected.json."""
    made = bundles()
    found = {
        "approved": (made["approved"], {"failed": [], "skipped": ALWAYS_SKIPPED}),
        "refused": (made["refused"], {"failed": [], "skipped": sorted([*ALWAYS_SKIPPED, *REFUSED_SKIPPED])}),
    }
    for name, (tamper, failed) in TAMPERINGS.items():
        bundle = copy.deepcopy(made["approved"])
        tamper(bundle)
        found[name] = (bundle, {"failed": sorted(failed), "skipped": ALWAYS_SKIPPED})
    unapproved = copy.deepcopy(made["approved"])  # policy held it for 2 approvals; it executed with none
    unapproved["approval"] = None
    skipped = sorted([*ALWAYS_SKIPPED, "approval.signatures", "approval.state_version"])
    found["executed-unapproved"] = (unapproved, {"failed": ["approval.quorum"], "skipped": skipped})
    found["edited"] = (edited(made["approved"]), {"failed": [], "skipped": ALWAYS_SKIPPED})
    tampered = edited(made["approved"])
    tampered["edit"]["decision"]["signature"] = flip_b64(tampered["edit"]["decision"]["signature"], 9)
    found["edited-tampered-edit-signature"] = (
        tampered,
        {"failed": ["approval.quorum", "call.payload_hash"], "skipped": ALWAYS_SKIPPED},
    )
    return found


def text_of(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write(out: Path = OUT) -> list[Path]:
    written = []
    for name, (bundle, expected) in vectors().items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for file, value in (("bundle.json", bundle), ("expected.json", expected)):
            (folder / file).write_text(text_of(value), encoding="utf-8")
            written.append(folder / file)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(path)
