"""The checks of what the agent proposed: proposal.*, call.payload_hash, call.digest."""

from __future__ import annotations

import hashlib
from typing import Any

from .approvals import edit_of, signed_decision
from .base import Failed, Skipped
from .bundle import Bundle, parse_json
from .canonical import canonical
from .hashes import leaf_hash, length_prefixed, path_root
from .notes import b64, ed25519_ok

PROPOSAL_ROOT = b"toolgate.proposal.root.v1"


def proposal_signature(b: Bundle) -> str:
    document = b64(b.need("proposal", "document"), "proposal.document")
    signature = b64(b.need("proposal", "signature"), "proposal.signature")
    key, proof = b.agent_key(), b.section("proposal").get("proof")
    if proof is None:
        if not ed25519_ok(key, signature, document):
            raise Failed("the agent's signature does not verify over the signing document")
        return "signed alone by the agent's key"
    root = path_root(leaf_hash(document), b64(proof, "proposal.proof"))
    if not ed25519_ok(key, signature, length_prefixed([PROPOSAL_ROOT, root])):
        raise Failed("the agent's signature does not verify over the root its Merkle path leads to")
    return "signed by the agent's key in a batch, through its Merkle path"


def proposal_document(b: Bundle) -> str:
    document, agent = b.document(), b.data["keys"].get("agent") or {}
    principal: dict[str, Any] = document["principal"] if isinstance(document.get("principal"), dict) else {}
    wanted = {
        "purpose": ("toolgate.proposal.v1", document.get("purpose")),
        "tenant_id": (b.data.get("tenant_id"), document.get("tenant_id")),
        "call_id": (b.data.get("call_id"), document.get("call_id")),
        "principal.agent_id": (agent.get("agent_id"), principal.get("agent_id")),
        "key_id": (agent.get("key_id"), document.get("key_id")),
    }
    wrong = [name for name, (want, got) in wanted.items() if want is None or want != got]
    if wrong:
        raise Failed(f"the signing document's {', '.join(wrong)} is not the bundle's")
    return f"names tenant {document['tenant_id']}, call {document['call_id']}, agent {principal['agent_id']}"


def proposal_arguments(b: Bundle) -> str:
    text = b.need("proposal", "arguments")
    if hashlib.sha256(str(text).encode("utf-8", "surrogateescape")).hexdigest() != b.document().get("arguments_sha256"):
        raise Failed("the argument text's SHA-256 is not the arguments_sha256 the agent signed")
    return "the argument text is the one the agent signed"


def payload_hash(arguments: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(arguments)).hexdigest()


def call_payload_hash(b: Bundle) -> str:
    arguments, claimed = b.need("call", "arguments"), b.need("call", "payload_hash")
    if not isinstance(arguments, dict) or payload_hash(arguments) != claimed:
        raise Failed("call.payload_hash is not the hash of call.arguments")
    edited = "" if b.data.get("edit") is None else edit_proven(b, claimed)
    proposed_held_in(b, arguments, "the validated arguments")
    return "the payload hash is the validated arguments', which hold every proposed argument" + edited


def proposed_held_in(b: Bundle, arguments: dict[str, Any], whose: str) -> None:
    """Every argument of the proposal's text is in `arguments`, equal (Skipped: no text)."""
    text = (b.data.get("proposal") or {}).get("arguments")
    if text is None:
        raise Skipped("proposal.arguments is null (not stored): the proposed arguments cannot be compared")
    try:
        proposed = parse_json(text)
    except ValueError as exc:
        raise Failed(f"the proposal's argument text is not JSON: {exc}") from exc
    if not isinstance(proposed, dict):
        raise Failed("the proposal's argument text is not a JSON object")
    differ = sorted(k for k, v in proposed.items() if k not in arguments or canonical(v) != canonical(arguments[k]))
    if differ:
        raise Failed(f"{whose} differ from the proposed ones at {', '.join(differ)}")


def edit_proven(b: Bundle, claimed: str) -> str:
    """An edited call: its editor signed, over the original ticket, the call's payload hash (the
    original's) and edited arguments whose payload hash is the edited call's ticket's."""
    edit = edit_of(b)
    if edit is None:
        raise Skipped("edit.decision.signed is null (not stored): the edit cannot be proven")
    row, ticket = edit
    signed = signed_decision(b, row, ticket)
    text, who = signed.get("edited_arguments"), row.get("approver_id")
    if signed.get("decision") != "APPROVE" or not isinstance(text, str):
        raise Failed(f"the edit decision {row.get('decision_id')} is not an approval with edited arguments")
    if ticket.get("payload_hash") != claimed:
        raise Failed(f"{who} edited another payload hash than call.payload_hash")
    edited = parse_json(text)
    if not isinstance(edited, dict) or payload_hash(edited) != b.section("approval")["ticket"]["payload_hash"]:
        raise Failed(f"the edited arguments {who} signed are not the edited call's ticket's")
    return f"; edited by {who} over {ticket.get('approval_id')} into the edited ticket's"


def call_digest(b: Bundle) -> str:
    content = {k: v for k, v in b.document().items() if k not in ("created_at_ms", "key_id")}
    if payload_hash(content) != b.need("call", "proposal_digest"):
        raise Failed("call.proposal_digest is not the digest of the signed document")
    return "the call is bound to the signed document's digest"
