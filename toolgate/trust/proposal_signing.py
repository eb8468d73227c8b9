"""Proposal signatures: who asked is proven by an Ed25519 signature, never by the topic.

An agent signs the RFC 8785 canonical JSON of the *signing document* of its proposal: every
field that decides what runs, with the model's argument text by the SHA-256 of its bytes (so
the signature can be checked before, and whether or not, the arguments parse):

    {"purpose": "toolgate.proposal.v1", "call_id", "tenant_id",
     "principal": {"user_id", "agent_id", "scopes"}, "workflow_id", "run_id",
     "logical_operation_id", "tool_name", "tool_version", "arguments_sha256",
     "idempotency_key", "deadline_ms", "repair_attempt", "dry_run", "compensation_of",
     "created_at_ms", "key_id"}

Any language can produce it: canonical JSON, then Ed25519 with the agent's registered key.

An agent that publishes several proposals at once may sign them once (`sign_all`): each
proposal's canonical document is a leaf of a Merkle tree (`toolgate.trust.merkle`), the agent signs
the tree's root under the purpose `toolgate.proposal.root.v1`, and each proposal carries that
signature and, in `signature_proof`, the path from its leaf to the root. Every field of every
proposal is signed all the same, through the hashes; validation checks a root's signature once
for all the proposals under it (`CheckedRoots`). A signature costs the agent and validation far
more than a hash (docs/performance.md, "Figures behind the code"): signed in trees of 64, a call
pays a sixty-fourth of each and ~6 SHA-256s on each side.

The *proposal digest* is the SHA-256 of the same document without `created_at_ms` and
`key_id`: what the call asks for, whenever and with whichever of the agent's keys it was
signed. A call_id is bound to one digest per tenant (a re-publication of the same call is
the same call; other content under the same call_id is refused), and every observation
carries its call's digest, so a client accepts only the answer to what it proposed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from toolgate.schemas.models import ToolProposal
from toolgate.schemas.wire import MAX_SAFE_INTEGER, compact_json
from toolgate.trust.ed25519 import PrivateKey, PublicKey
from toolgate.trust.merkle import CheckedRoots, leaf_hash, merkle_tree, root_of, signed_root

PURPOSE = "toolgate.proposal.v1"
ROOT_PURPOSE = b"toolgate.proposal.root.v1"
DIGEST_PREFIX = "sha256:"


def arguments_sha256(arguments: str) -> str:
    """SHA-256 (hex) of the argument text's bytes as they travel (UTF-8)."""
    return hashlib.sha256(arguments.encode("utf-8", "surrogateescape")).hexdigest()


def _content(proposal: ToolProposal) -> dict[str, Any]:
    p = proposal.principal
    return {
        "purpose": PURPOSE,
        "call_id": proposal.call_id,
        "tenant_id": proposal.tenant_id,
        "principal": {"user_id": p.user_id, "agent_id": p.agent_id, "scopes": list(p.scopes)},
        "workflow_id": proposal.workflow_id,
        "run_id": proposal.run_id,
        "logical_operation_id": proposal.logical_operation_id,
        "tool_name": proposal.tool_name,
        "tool_version": proposal.tool_version,
        "arguments_sha256": arguments_sha256(proposal.arguments),
        "idempotency_key": proposal.idempotency_key,
        "deadline_ms": proposal.deadline_ms,
        "repair_attempt": proposal.repair_attempt,
        "dry_run": proposal.dry_run,
        "compensation_of": proposal.compensation_of,
    }


def signing_document(proposal: ToolProposal) -> dict[str, Any]:
    return _document(_content(proposal), proposal.created_at_ms, proposal.key_id)


def _document(content: dict[str, Any], created_at_ms: int, key_id: str | None) -> dict[str, Any]:
    return {**content, "created_at_ms": created_at_ms, "key_id": key_id}


def _canonical(document: dict[str, Any]) -> bytes:
    """RFC 8785 of a signing document, at the price of one sorted compact JSON encoding (every
    proposal is signed by its client and checked by validation, so this is on the hot path).

    For this document, sorted compact JSON (`compact_json`) *is* RFC 8785: its keys are fixed ASCII
    names, its values strings, integers, booleans, nulls and a list of strings, never floats;
    JSON strings are escaped alike by both (and kept as UTF-8). What is left to check: every
    integer within IEEE 754's exact range, and no lone surrogate in a string (encoding fails).
    A unit test compares it with the rfc8785 package over arbitrary field values."""
    for name in ("deadline_ms", "repair_attempt", "created_at_ms"):
        value = document.get(name)
        if value is not None and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise ValueError(f"{name} is outside the range canonical JSON represents exactly")
    return compact_json(document).encode()


def signed_bytes(proposal: ToolProposal) -> bytes:
    return _canonical(signing_document(proposal))


def digest(proposal: ToolProposal) -> str:
    """What the call asks for, independent of when and with which key it was signed."""
    return _digest(_content(proposal))


def document_digest(document: dict[str, Any]) -> str:
    """The digest of a signing document as it was signed (its `created_at_ms` and `key_id` left
    out): what an offline verifier recomputes from the document a call's evidence carries."""
    return _digest({k: v for k, v in document.items() if k not in ("created_at_ms", "key_id")})


def _digest(content: dict[str, Any]) -> str:
    return DIGEST_PREFIX + hashlib.sha256(_canonical(content)).hexdigest()


def sign(proposal: ToolProposal, key_id: str, key: PrivateKey) -> ToolProposal:
    return signed_with_digest(proposal, key_id, key)[0]


def signed_with_digest(proposal: ToolProposal, key_id: str, key: PrivateKey) -> tuple[ToolProposal, str]:
    """The proposal signed with `key`, and its `digest`, from one signing content (a client
    does both for every call it proposes)."""
    content = _content(proposal)
    signature = key.sign(_canonical(_document(content, proposal.created_at_ms, key_id)))
    return proposal.model_copy(update={"key_id": key_id, "signature": signature}), _digest(content)


def sign_all(proposals: Sequence[ToolProposal], key_id: str, key: PrivateKey) -> list[tuple[ToolProposal, str]]:
    """Each proposal signed with `key`, and its digest: one signature over the root of their
    tree, each with its proof (one proposal alone is signed as `signed_with_digest` signs it)."""
    if len(proposals) == 1:
        return [signed_with_digest(proposals[0], key_id, key)]
    contents = [_content(p) for p in proposals]
    messages = [_canonical(_document(c, p.created_at_ms, key_id)) for c, p in zip(contents, proposals, strict=True)]
    root, proofs = merkle_tree([leaf_hash(m) for m in messages])
    signature = key.sign(signed_root(ROOT_PURPOSE, root))
    return [
        (p.model_copy(update={"key_id": key_id, "signature": signature, "signature_proof": proof}), _digest(c))
        for p, c, proof in zip(proposals, contents, proofs, strict=True)
    ]


def verified_digest(proposal: ToolProposal, public_key: PublicKey, roots: CheckedRoots | None = None) -> str | None:
    """The proposal's digest if `public_key` signed exactly this proposal (alone, or in a tree
    whose root it signed: `roots` remembers the roots already checked), else None."""
    held = verified(proposal, public_key, roots)
    return None if held is None else held[0]


def verified(
    proposal: ToolProposal, public_key: PublicKey, roots: CheckedRoots | None = None
) -> tuple[str, bytes] | None:
    """The proposal's digest and the signing document's bytes that verified (`signed_bytes`), if
    `public_key` signed exactly this proposal, else None: `verify`, `digest` and the document
    from one signing document (validation checks every proposal this way, and stores the
    document it checked in toolgate.calls: the evidence of who asked)."""
    if not proposal.signature:
        return None
    content = _content(proposal)
    try:
        message = _canonical(_document(content, proposal.created_at_ms, proposal.key_id))
    except ValueError:  # a field RFC 8785 cannot represent: nobody can have signed it
        return None
    if proposal.signature_proof is None:
        held = public_key.ok(proposal.signature, message)
    else:
        root = root_of(leaf_hash(message), proposal.signature_proof)
        checked = roots if roots is not None else CheckedRoots(ROOT_PURPOSE)
        held = root is not None and checked.ok(public_key, proposal.signature, root)
    return (_digest(content), message) if held else None


def verify(proposal: ToolProposal, public_key: PublicKey) -> bool:
    """True only for a signature by `public_key` over exactly this proposal's document."""
    return verified_digest(proposal, public_key) is not None
