"""The agent's signed proposal and the call it became: `proposal.signature`, `proposal.document`,
`proposal.arguments`, `call.payload_hash`, `call.digest` (docs/evidence.md, "Checks"), through
toolgate's own functions (toolgate/trust/proposal_signing.py, merkle.py, schemas/hashing.py). An
edited call's `call` is the original the proposal proves; the edit (the bundle's `edit`) proves
the edited arguments its editor signed over it are the edited ticket's."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from toolgate.ops.evidence_checks.approval import editor
from toolgate.ops.evidence_checks.trust import b64, json_of, part, public_key
from toolgate.ops.evidence_checks.verdict import Check, failed, ok, skipped
from toolgate.schemas.hashing import payload_hash
from toolgate.schemas.models import Verdict
from toolgate.schemas.wire import canonical_json
from toolgate.trust.merkle import CheckedRoots, leaf_hash, root_of
from toolgate.trust.proposal_signing import PURPOSE, ROOT_PURPOSE, arguments_sha256, document_digest


def signed_document(bundle: Any) -> bytes | None:
    """The document the agent signed, or None: the bundle holds none (a row from before 0036)."""
    proposal = bundle.get("proposal")
    if not isinstance(proposal, dict) or proposal.get("document") is None:
        return None
    return b64(proposal["document"], "proposal.document")


def signature(bundle: Any) -> Check:
    name = "proposal.signature"
    document = signed_document(bundle)
    if document is None:
        return skipped(name, "the bundle holds no proposal.document")
    agent = bundle["keys"].get("agent")
    if agent is None:
        return skipped(name, "the bundle holds no keys.agent")
    if bundle["proposal"].get("signature") is None:
        return skipped(name, "the bundle holds no proposal.signature")
    key = public_key(agent.get("public_key"), "keys.agent.public_key")
    sig = b64(bundle["proposal"]["signature"], "proposal.signature")
    proof = bundle["proposal"].get("proof")
    if proof is None:
        held = key.ok(sig, document)
    else:
        root = root_of(leaf_hash(document), b64(proof, "proposal.proof"))
        held = root is not None and CheckedRoots(ROOT_PURPOSE).ok(key, sig, root)
    how = "alone" if proof is None else "under a signed Merkle root"
    if not held:
        return failed(name, f"the proposal's signature does not verify under agent {agent.get('agent_id')}'s key")
    return ok(name, f"signed {how} by agent {agent.get('agent_id')} with key {agent.get('key_id')}")


def document_check(bundle: Any) -> Check:
    name = "proposal.document"
    raw = signed_document(bundle)
    if raw is None:
        return skipped(name, "the bundle holds no proposal.document")
    document = json_of(raw, "proposal.document")
    agent = bundle["keys"].get("agent") or {}
    named = {
        "purpose": (document.get("purpose"), PURPOSE),
        "tenant_id": (document.get("tenant_id"), bundle.get("tenant_id")),
        "call_id": (document.get("call_id"), bundle.get("call_id")),
        "principal.agent_id": ((document.get("principal") or {}).get("agent_id"), agent.get("agent_id")),
        "key_id": (document.get("key_id"), agent.get("key_id")),
    }
    for field, (said, wanted) in named.items():
        if said != wanted:
            return failed(name, f"the signed document's {field} is {said!r}, not {wanted!r}")
    return ok(name, f"names tenant {document['tenant_id']}, call {document['call_id']} and the agent's key")


def _against_document(
    bundle: Any, name: str, where: tuple[str, str], problem: Callable[[dict[str, Any], Any], str | None], fine: str
) -> Check:
    """Check `name`: the bundle's `where` (section, field) against the signed document, `problem`
    saying what does not hold (None: it holds); skipped, naming which of the two the bundle lacks."""
    raw = signed_document(bundle)
    value = (bundle.get(where[0]) or {}).get(where[1])
    if raw is None or value is None:
        return skipped(name, "the bundle holds no " + ("proposal.document" if raw is None else ".".join(where)))
    said = problem(json_of(raw, "proposal.document"), value)
    return ok(name, fine) if said is None else failed(name, said)


def _text_unsigned(document: dict[str, Any], text: Any) -> str | None:
    if not isinstance(text, str):
        return "proposal.arguments is not text"
    if arguments_sha256(text) != document.get("arguments_sha256"):
        return "the SHA-256 of the argument text is not the signed document's arguments_sha256"
    return None


def arguments(bundle: Any) -> Check:
    fine = "the argument text is the one the agent signed"
    return _against_document(bundle, "proposal.arguments", ("proposal", "arguments"), _text_unsigned, fine)


def payload(bundle: Any) -> Check:
    name = "call.payload_hash"
    call = bundle.get("call") or {}
    validated, claimed = call.get("arguments"), call.get("payload_hash")
    if validated is None or claimed is None:
        return skipped(name, "the bundle holds no call.arguments (no policy record)")
    if not isinstance(validated, dict):
        return failed(name, "call.arguments is not a JSON object")
    if payload_hash(validated) != claimed:
        return failed(name, "call.payload_hash is not the hash of call.arguments")
    unproven = None if bundle.get("edit") is None else _unproven_edit(bundle, claimed)
    if unproven is not None:
        return unproven
    text = (bundle.get("proposal") or {}).get("arguments")
    if text is None:
        return skipped(name, "the bundle holds no proposal.arguments: the proposed arguments cannot be compared")
    said = _not_held(text, validated, "the validated call's")
    fine = "the payload hash is the validated arguments', which hold the proposal's"
    fine += "" if bundle.get("edit") is None else "; edited, as the editor signed, into the edited ticket's"
    return ok(name, fine) if said is None else failed(name, said)


def _not_held(text: Any, arguments: Any, whose: str) -> str | None:
    """Why the proposal's argument text is not held in `arguments` (None: every key is, equal)."""
    try:
        parsed = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return "the proposal's argument text is not JSON"
    if not isinstance(parsed, dict) or not isinstance(arguments, dict):
        return "the proposal's argument text is not a JSON object"
    for key, value in parsed.items():
        if key not in arguments or canonical_json(arguments[key]) != canonical_json(value):
            return f"argument {key!r} of the proposal's text is not {whose}"
    return None


def _unproven_edit(bundle: Any, claimed: str) -> Check | None:
    """An edited call (docs/evidence.md, "Edited calls"): the editor signed, over the original
    ticket, the call's payload hash (the original's) and edited arguments whose payload hash is the
    edited call's ticket's. Failed or skipped saying which does not hold; None: it all holds."""
    name = "call.payload_hash"
    found = editor(bundle)
    if found is None:
        return skipped(name, "the bundle holds no edit.decision.signed: the edit cannot be proven")
    signed, ticket = found
    if signed.problem is not None or signed.decision is None:
        return failed(name, f"the edit is not proven: {signed.problem}")
    edit = signed.decision
    if edit.decision is not Verdict.APPROVE or edit.edited_arguments is None:
        return failed(name, f"decision {edit.decision_id} is not an approval with edited arguments")
    if ticket.get("payload_hash") != claimed:
        return failed(name, f"{edit.approver_id} edited another payload hash than call.payload_hash")
    try:
        edited = json.loads(edit.edited_arguments)
    except json.JSONDecodeError:
        return failed(name, f"the edited arguments of decision {edit.decision_id} are not JSON")
    if bundle.get("approval") is None:
        return skipped(name, "the bundle holds no approval: the edited call's ticket is not there to compare")
    if not isinstance(edited, dict) or payload_hash(edited) != part(bundle, "approval", "ticket", "payload_hash"):
        return failed(name, f"the edited arguments {edit.approver_id} signed are not the edited call's ticket's")
    return None


def _not_the_digest(document: dict[str, Any], claimed: Any) -> str | None:
    if document_digest(document) != claimed:
        return "call.proposal_digest is not the digest of the signed document"
    return None


def digest(bundle: Any) -> Check:
    fine = "the call's proposal digest is the signed document's"
    return _against_document(bundle, "call.digest", ("call", "proposal_digest"), _not_the_digest, fine)
