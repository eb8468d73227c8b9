"""The checks of what the deployment published and logged: observation.signature, audit.*,
checkpoint.*, and decisions.rederived (skipped: it needs toolgate)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from .base import Failed, Skipped
from .bundle import Bundle
from .canonical import canonical
from .hashes import inclusion_root, leaf_hash, length_prefixed, path_root, sha256
from .notes import Note, b64, cosigned, ed25519_ok, note_signed, parse_note

EDGE_ROOT, EDGE = b"toolgate.edge.root.v1", b"toolgate.edge.v1"


def first_header(headers: list[tuple[str, bytes | None]], name: str) -> bytes | None:
    return next((v for k, v in headers if k == name), None)


def header_text(headers: list[tuple[str, bytes | None]], name: str) -> str:
    """The first `name` header with a value, as UTF-8 text ("" when missing or not UTF-8)."""
    value = next((v for k, v in headers if k == name and v is not None), None)
    try:
        return value.decode() if value is not None else ""
    except UnicodeDecodeError:
        return ""


def edge_signed_bytes(topic: str, key: bytes | None, headers: list[tuple[str, bytes | None]], value: bytes) -> bytes:
    """What the deployment signs on an observation: LP(purpose, topic, key, call_id header,
    toolgate-proposal header, SHA-256 of the value)."""
    fields = [EDGE, topic.encode(), key or b"", header_text(headers, "call_id").encode()]
    return length_prefixed([*fields, header_text(headers, "toolgate-proposal").encode(), sha256(value)])


def observation_ok(b: Bundle, number: int, record: dict[str, Any]) -> None:
    what = f"observation {number}"
    headers = [(str(k), None if v is None else b64(v, f"{what}'s header {k}")) for k, v in record["headers"]]
    key = None if record.get("key") is None else b64(record["key"], f"{what}'s key")
    message = edge_signed_bytes(str(record["topic"]), key, headers, b64(record["value"], f"{what}'s value"))
    named = first_header(headers, "toolgate-key-id")
    candidates = (
        list(b.keys.deployment.values())
        if named is None
        else [b.keys.deployment.get(named.decode(errors="replace"), b"")]
    )
    signature, proof = first_header(headers, "toolgate-signature") or b"", first_header(headers, "toolgate-proof")
    signed = message if proof is None else length_prefixed([EDGE_ROOT, path_root(leaf_hash(message), proof)])
    if not any(len(k) == 32 and ed25519_ok(k, signature, signed) for k in candidates):
        raise Failed(f"{what}'s signature does not verify under the deployment key it names")
    if header_text(headers, "call_id") != b.data.get("call_id"):
        raise Failed(f"{what}'s call_id header is not this call")
    if header_text(headers, "toolgate-proposal") != (b.data.get("call") or {}).get("proposal_digest"):
        raise Failed(f"{what}'s toolgate-proposal header is not this call's proposal digest")


def observation_signature(b: Bundle) -> str:
    records = b.data.get("observations") or []
    if not records:
        raise Skipped("the bundle has no observations")
    for number, record in enumerate(records, 1):
        observation_ok(b, number, record)
    return f"{len(records)} observation(s), each signed by the deployment for this call and digest"


def chain_hash(row: dict[str, Any]) -> str:
    body = {k: row.get(k) for k in ("at", "stage", "action", "actor", "call_id", "tenant_id", "detail")}
    return hashlib.sha256(str(row.get("prev_hash")).encode() + canonical(body)).hexdigest()


def audit_rows(b: Bundle) -> str:
    rows = b.data["audit"]["rows"]
    if not rows:
        raise Skipped("the bundle holds no audit rows")
    for row in rows:
        if chain_hash(row) != row.get("hash"):
            raise Failed(f"audit row {row.get('id')}'s hash is not the chain hash of its fields")
    return f"{len(rows)} audit row(s), each hash the chain hash of its fields"


def audit_inclusion(b: Bundle) -> str:
    checkpoint = b.data["audit"].get("checkpoint")
    if not b.data["audit"]["rows"]:
        raise Skipped("the bundle holds no audit rows")
    if checkpoint is None:
        raise Failed("the bundle has no checkpoint: its audit rows are in no signed tree")
    size, root = checkpoint.get("tree_size"), bytes.fromhex(str(checkpoint.get("root_hash")))
    for row in b.data["audit"]["rows"]:
        if row.get("inclusion") is None:
            raise Failed(f"audit row {row.get('id')} is newer than the checkpoint: it is not yet in a signed tree")
        proof = [bytes.fromhex(h) for h in row["inclusion"]]
        if inclusion_root(bytes.fromhex(str(row.get("hash"))), row.get("leaf_index"), size, proof) != root:
            raise Failed(f"audit row {row.get('id')} is not leaf {row.get('leaf_index')} of the checkpoint's tree")
    return f"every row is a leaf of the checkpoint's tree of {size}"


def checkpoint_note(b: Bundle) -> tuple[dict[str, Any], Note]:
    checkpoint = b.data["audit"].get("checkpoint")
    if checkpoint is None:
        raise Skipped("the bundle has no checkpoint (no tree head yet)")
    return checkpoint, parse_note(str(checkpoint.get("note")))


def checkpoint_signature(b: Bundle) -> str:
    checkpoint, note = checkpoint_note(b)
    origin = note.text.split("\n", 1)[0]
    root = base64.b64encode(bytes.fromhex(str(checkpoint.get("root_hash")))).decode()
    if note.text != f"{origin}\n{checkpoint.get('tree_size')}\n{root}\n":
        raise Failed("the note's text is not the checkpoint's origin, tree size and root hash")
    key = b.keys.deployment.get(str(checkpoint.get("key_id")))
    if key is None:
        raise Failed(f"the checkpoint names deployment key {checkpoint.get('key_id')}, which is not trusted")
    if not note_signed(note, origin, key):
        raise Failed(f"the checkpoint's signature by {origin} does not verify under {checkpoint.get('key_id')}")
    return f"{origin}'s tree of {checkpoint.get('tree_size')}, signed by {checkpoint.get('key_id')}"


def checkpoint_cosignatures(b: Bundle) -> str:
    if b.keys.unreadable:
        raise Failed(b.keys.unreadable[0])
    if not b.keys.witnesses:
        raise Skipped("no witnesses are configured")
    _, note = checkpoint_note(b)
    verdicts = {name: cosigned(note, name, key) for name, key in b.keys.witnesses}
    bad = [name for name, ok in verdicts.items() if ok is False]
    if bad:
        raise Failed(f"the cosignature of {', '.join(bad)} does not verify under its key")
    absent = [name for name, ok in verdicts.items() if ok is None]
    if absent and b.keys.pinned_witnesses:
        raise Failed(f"the witness(es) you pinned did not cosign the checkpoint: {', '.join(absent)}")
    cosigners = [name for name, ok in verdicts.items() if ok]
    said = f"cosigned by {', '.join(cosigners)}" if cosigners else "cosigned by no witness"
    return said + (f"; no cosignature from {', '.join(absent)}" if absent else "")


def decisions_rederived(b: Bundle) -> str:
    raise Skipped("re-deriving the decisions needs toolgate's own decisions: `toolgate evidence verify` does it")
