#!/usr/bin/env python3
"""toolgate_evidence: a second, independent verifier of toolgate evidence bundles.

    python toolgate_evidence.py bundle.json [--json] [--deployment-key B64]... [--witness-vkey VKEY]...

A bundle (`toolgate evidence CALL_ID > bundle.json`, format `toolgate.evidence/v1`, documented in
toolgate's docs/evidence.md) is one call's story with what proves it. This module checks it from
that document alone: it imports nothing of toolgate, only the standard library and `cryptography`
(for Ed25519), and implements itself what it checks with: RFC 8785 canonical JSON, toolgate's
Merkle paths, RFC 9162 inclusion proofs, C2SP signed notes and cosignature/v1, the audit log's
chain hash and the deployment's edge-signed bytes. `toolgate evidence verify` is the first opinion;
on the same bundle both name the same checks with the same statuses.

What it checks, one line each (ok / FAILED: what does not hold / skipped: why):

    proposal.signature       the agent's Ed25519 over the signing document (or a batch root)
    proposal.document        the document names this tenant, call, agent and agent key id
    proposal.arguments       the argument text is the one the agent signed (its SHA-256)
    call.payload_hash        the payload hash is the validated arguments', which hold the proposed ones
                             (an edited call: and its editor signed the edited ticket's over it)
    call.digest              the call's proposal digest is the signed document's
    approval.signatures      each decision signed by its approver for this ticket, tool and payload
    approval.state_version   each decision signs the ticket's target state version
    approval.quorum          enough distinct, active approvers of the right class and groups, in time
    execution.once           the idempotency key COMPLETED, one audit row records the execution
    observation.signature    each observation sealed by the deployment for this call and digest
    audit.rows               each audit row's hash is the chain hash of its fields
    audit.inclusion          each audit row is a leaf of the checkpoint's tree (RFC 9162)
    checkpoint.signature     the checkpoint note is signed by the deployment key it names
    checkpoint.cosignatures  each witness's cosignature verifies (a missing one is reported)
    decisions.rederived      skipped here: re-running toolgate's decisions needs toolgate

What it trusts: SHA-256, Ed25519 (as OpenSSL checks it, through `cryptography`) and the public
keys. The keys come from the bundle itself unless the auditor pins them (`--deployment-key`, the
deployment's Ed25519 public key in base64, repeatable; `--witness-vkey`, a witness's C2SP verifier
key, repeatable, whose cosignature is then required). A bundle's own keys prove only that the
bundle is consistent: compare them with the keys the deployment publishes, or pin them. Unsigned
rows are the deployment's word: the ticket (required approvals, risk class, groups, window,
status), the approvers' and agent's key rows (groups, classes, registration and revocation
times), the execution row; a check that counts on them says so by its name. `decoded` and
`made_at` are trusted by nothing. No clock and no network are consulted. toolgate checks
Ed25519 by ZIP 215 and OpenSSL checks it strictly: a signature only ZIP 215 admits (one only the
key's holder can craft) fails here.

Exit status: 0 when no check failed, 1 when one did, 2 when the bundle could not be read.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import math
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

FORMAT = "toolgate.evidence/v1"
OK, FAILED, SKIPPED = "ok", "failed", "skipped"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Failed(Exception):
    """A check that does not hold: its message is one sentence saying what does not."""


class Skipped(Exception):
    """A check that cannot be made on this bundle: its message says why."""


# --- 1. RFC 8785 canonical JSON ------------------------------------------------------------------

MAX_SAFE_INTEGER = 2**53 - 1
ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def canonical(value: Any) -> bytes:
    """RFC 8785 (JCS): the one byte string of a JSON value (ValueError: not representable)."""
    return "".join(_canonical_parts(value)).encode("utf-8")


def _canonical_parts(value: Any) -> Iterator[str]:
    if value is None or isinstance(value, bool):
        yield {None: "null", True: "true", False: "false"}[value]
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"the integer {value} is outside the range JSON numbers hold exactly")
        yield str(value)
    elif isinstance(value, float):
        yield es_number(value)
    elif isinstance(value, str):
        yield es_string(value)
    elif isinstance(value, list | tuple):
        yield "["
        for i, item in enumerate(value):
            yield "," if i else ""
            yield from _canonical_parts(item)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for i, key in enumerate(sorted(value, key=utf16_order)):
            yield ("," if i else "") + es_string(key) + ":"
            yield from _canonical_parts(value[key])
        yield "}"
    else:
        raise ValueError(f"{type(value).__name__} is not a JSON value")


def utf16_order(key: Any) -> bytes:
    """Object keys sort by their UTF-16 code units (RFC 8785 3.2.3)."""
    if not isinstance(key, str):
        raise ValueError("an object key is a string")
    return key.encode("utf-16-be", "surrogatepass")


def es_string(text: str) -> str:
    """A JSON string as RFC 8785 3.2.2.2 writes it: only '"', '\\' and controls escaped."""
    out = []
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            raise ValueError("a string holds a lone surrogate, which UTF-8 cannot carry")
        out.append(ESCAPES.get(ch) or (f"\\u{ord(ch):04x}" if ch < " " else ch))
    return '"' + "".join(out) + '"'


def es_number(x: float) -> str:
    """A double as ECMAScript's Number.prototype.toString writes it (RFC 8785 3.2.2.3)."""
    if not math.isfinite(x):
        raise ValueError("NaN and infinities are not JSON numbers")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    mantissa, _, exponent = repr(x).partition("e")  # repr: the shortest digits that read back as x
    whole, _, fraction = mantissa.partition(".")
    run = whole + fraction
    digits = run.lstrip("0")
    n = len(whole) - (len(run) - len(digits)) + int(exponent or 0)  # x = 0.digits * 10**n
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = f"e{'+' if n - 1 > 0 else '-'}{abs(n - 1)}"
    return (digits if k == 1 else digits[0] + "." + digits[1:]) + e


# --- 2. Hashes: Merkle paths (toolgate's batch signatures) and RFC 9162 inclusion ----------------


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def length_prefixed(fields: Sequence[bytes]) -> bytes:
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


def path_root(leaf: bytes, proof: bytes) -> bytes:
    """The root a toolgate Merkle path leads to from `leaf`: steps of 33 bytes, b"L" or b"R" (the
    side the sibling is on) then the sibling's hash, from the leaf up; at most 32 steps."""
    if len(proof) % 33 or len(proof) > 32 * 33:
        raise Failed("the Merkle path is not a whole number of 33-byte steps (at most 32)")
    node = leaf
    for at in range(0, len(proof), 33):
        side, sibling = proof[at : at + 1], proof[at + 1 : at + 33]
        if side not in (b"L", b"R"):
            raise Failed("a Merkle path step names neither side")
        node = node_hash(sibling, node) if side == b"L" else node_hash(node, sibling)
    return node


def inclusion_root(data: bytes, index: int, size: int, proof: Sequence[bytes]) -> bytes | None:
    """The root RFC 9162 2.1.3.2's verification computes for leaf `data` at `index` of a tree of
    `size` with the inclusion proof `proof`; None where the proof does not fit the tree."""
    if not 0 <= index < size or len(proof) > 63:
        return None
    fn, sn, r = index, size - 1, leaf_hash(data)
    for p in proof:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None


# --- 3. Signatures: Ed25519, C2SP signed notes and cosignature/v1 --------------------------------

DASH = "\u2014 "
NOTE_ED25519, NOTE_COSIGNATURE_V1 = 0x01, 0x04


def ed25519_ok(public_key: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def b64(text: Any, what: str) -> bytes:
    """Standard base64 with padding, strictly."""
    if not isinstance(text, str):
        raise Failed(f"{what} is not a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Failed(f"{what} is not valid base64") from exc


def note_key_id(name: str, kind: int, public_key: bytes) -> bytes:
    return sha256(name.encode() + b"\n" + bytes([kind]) + public_key)[:4]


@dataclass(frozen=True)
class Note:
    text: str  # the signed text, every line ending in a newline
    signatures: tuple[tuple[str, bytes, bytes], ...]  # (key name, key id, signature bytes)


def parse_note(note: str) -> Note:
    """A C2SP signed note: text, a blank line, then lines `— <name> base64(key id || signature)`."""
    text, blank, lines = note.rpartition("\n\n")
    if not blank or not note.endswith("\n"):
        raise Failed("the checkpoint is not a signed note (text, a blank line, signature lines)")
    found = []
    for line in lines.splitlines():
        name, _, encoded = line.removeprefix(DASH).partition(" ")
        raw = b64(encoded, "a signature line")
        if not line.startswith(DASH) or not name or len(raw) <= 4:
            raise Failed("a signature line of the checkpoint is not `— <name> <base64>`")
        found.append((name, raw[:4], raw[4:]))
    return Note(text + "\n", tuple(found))


def note_signed(note: Note, name: str, public_key: bytes) -> bool:
    """Whether `name`'s Ed25519 key signed the note's text (signature type 0x01)."""
    wanted = note_key_id(name, NOTE_ED25519, public_key)
    return any(
        n == name and k == wanted and ed25519_ok(public_key, s, note.text.encode()) for n, k, s in note.signatures
    )


def cosigned(note: Note, name: str, public_key: bytes) -> bool | None:
    """Whether the witness `name` cosigned the note (cosignature/v1: 8-byte big-endian time, then
    Ed25519 over "cosignature/v1\\ntime <t>\\n" || text); None: it has no line in the note."""
    wanted = note_key_id(name, NOTE_COSIGNATURE_V1, public_key)
    lines = [s for n, k, s in note.signatures if n == name and k == wanted]
    if not lines:
        return None
    for s in lines:
        at = int.from_bytes(s[:8], "big")
        message = f"cosignature/v1\ntime {at}\n".encode() + note.text.encode()
        if len(s) == 72 and at < 2**63 and ed25519_ok(public_key, s[8:], message):
            return True
    return False


def parse_vkey(vkey: str) -> tuple[str, int, bytes]:
    """A signed-note verifier key `<name>+<hex key id>+<base64(type || public key)>`, its id checked."""
    name, _, rest = vkey.strip().partition("+")
    hex_id, _, encoded = rest.partition("+")
    raw = b64(encoded, "a verifier key")
    if not name or len(raw) != 33 or note_key_id(name, raw[0], raw[1:]).hex() != hex_id.lower():
        raise Failed(f"the verifier key of {name!r} is not <name>+<hex key id>+<base64 key> with a matching id")
    return name, raw[0], raw[1:]


# --- 4. The bundle and the keys it is checked with ----------------------------------------------


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise ValueError("an object names a key twice, so two readers may read it differently")
    return found


def not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes) -> Any:
    """Strict JSON: no NaN or infinities, no key named twice in one object."""
    return json.loads(text, object_pairs_hook=no_duplicate_keys, parse_constant=not_a_number)


def deployment_key_id(public_key: bytes) -> str:
    return "dk_" + hashlib.sha256(public_key).hexdigest()[:16]


def micros(timestamp: Any, what: str) -> int:
    """An RFC 3339 UTC timestamp (`2026-11-30T17:02:03.123456Z`) as microseconds since the epoch."""
    if not isinstance(timestamp, str) or not timestamp.endswith("Z"):
        raise Failed(f"{what} is not an RFC 3339 UTC timestamp")
    try:
        at = datetime.fromisoformat(timestamp[:-1]).replace(tzinfo=UTC)
    except ValueError as exc:
        raise Failed(f"{what} is not an RFC 3339 UTC timestamp") from exc
    return (at - EPOCH) // timedelta(microseconds=1)


@dataclass
class Trusted:
    """The keys the checks use: the bundle's own, or those the auditor pinned instead."""

    deployment: dict[str, bytes] = field(default_factory=dict)  # key id -> Ed25519 public key
    witnesses: list[tuple[str, bytes]] = field(default_factory=list)  # (name, Ed25519 public key)
    pinned_deployment: bool = False
    pinned_witnesses: bool = False
    unreadable: list[str] = field(default_factory=list)  # witnesses' verifier keys that do not parse


def trusted_keys(bundle: dict[str, Any], deployment: Sequence[bytes], witnesses: Sequence[str]) -> Trusted:
    """The deployment keys whose id matches their key (the bundle's, unless `deployment` pins
    some) and the witnesses' cosignature keys (the bundle's, unless `witnesses` pins some)."""
    keys = bundle.get("keys") or {}
    trusted = Trusted(pinned_deployment=bool(deployment), pinned_witnesses=bool(witnesses))
    if deployment:
        trusted.deployment = {deployment_key_id(raw): raw for raw in deployment}
    for entry in [] if deployment else keys.get("deployment") or []:
        try:
            raw = b64(entry.get("public_key"), "a deployment public key")
        except (Failed, AttributeError):
            continue  # as an entry whose id does not match its key: ignored
        if len(raw) == 32 and entry.get("key_id") == deployment_key_id(raw):
            trusted.deployment[entry["key_id"]] = raw
    listed = [w.get("vkey") if isinstance(w, dict) else None for w in keys.get("witnesses") or []]
    for vkey in witnesses or listed:
        try:
            name, kind, raw = parse_vkey(str(vkey))
        except Failed as exc:
            trusted.unreadable.append(str(exc))
            continue
        if kind != NOTE_COSIGNATURE_V1:
            trusted.unreadable.append(f"witness {name}'s verifier key is not a cosignature/v1 key")
        else:
            trusted.witnesses.append((name, raw))
    return trusted


@dataclass
class Bundle:
    data: dict[str, Any]
    keys: Trusted

    def section(self, name: str) -> dict[str, Any]:
        """A section of the bundle; Skipped when it is null."""
        value = self.data.get(name)
        if value is None:
            raise Skipped(f"the bundle has no {name}")
        if not isinstance(value, dict):
            raise Failed(f"the bundle's {name} is not an object")
        return value

    def need(self, section: str, name: str) -> Any:
        """A field of a section; Skipped when it is null or absent (not stored)."""
        value = self.section(section).get(name)
        if value is None:
            raise Skipped(f"{section}.{name} is null (not stored)")
        return value

    def document(self) -> dict[str, Any]:
        """The proposal's signing document, parsed."""
        try:
            document = parse_json(b64(self.need("proposal", "document"), "proposal.document"))
        except ValueError as exc:
            raise Failed(f"proposal.document is not JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise Failed("proposal.document is not a JSON object")
        return document

    def agent_key(self) -> bytes:
        agent = self.data["keys"].get("agent")
        if agent is None:
            raise Skipped("keys.agent is null: the agent's key row was not found")
        return b64(agent["public_key"], "keys.agent.public_key")


# --- 5. The checks (docs/evidence.md, "Checks"), each returning its detail or raising ------------

PROPOSAL_ROOT, EDGE_ROOT, EDGE = b"toolgate.proposal.root.v1", b"toolgate.edge.root.v1", b"toolgate.edge.v1"


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


def approval_keys(b: Bundle) -> dict[str, dict[str, Any]]:
    keys = {str(a.get("approver_id")): a for a in b.data["keys"].get("approvers") or []}
    agent = b.data["keys"].get("agent")
    if agent is not None:
        keys["agent:" + str(agent.get("agent_id"))] = agent
    return keys


def signed_decision(b: Bundle, row: dict[str, Any], ticket: dict[str, Any] | None = None) -> dict[str, Any]:
    """A decision's signed object, once its signature and the fields it must name (of `ticket`,
    by default the approval's) hold."""
    ticket = b.section("approval")["ticket"] if ticket is None else ticket
    who = row.get("approver_id")
    signed = b64(row.get("signed"), f"decision {row.get('decision_id')}'s signed bytes")
    signer = approval_keys(b).get(str(who))
    if signer is None:
        raise Failed(f"decision {row.get('decision_id')} is by {who}, whose key the bundle does not hold")
    key = b64(signer.get("public_key"), f"{who}'s public key")
    if not ed25519_ok(key, b64(row.get("signature"), "a decision's signature"), signed):
        raise Failed(f"decision {row.get('decision_id')}'s signature does not verify under {who}'s key")
    document = parse_json(signed)
    named = {"decision_id": row.get("decision_id"), "approver_id": who}
    named |= {k: ticket.get(k) for k in ("approval_id", "tool_name", "tool_version", "payload_hash")}
    wrong = [k for k, v in named.items() if document.get(k) != v]
    if wrong:
        raise Failed(f"decision {row.get('decision_id')} names another {', '.join(wrong)} than the ticket's")
    return dict(document)


def decision_rows(b: Bundle) -> list[dict[str, Any]]:
    """The ticket's decisions that carry signed bytes. A decision stored without them (a row from
    before 0036) is neither counted nor failed; when none carries them, there is nothing to check."""
    rows = b.section("approval")["decisions"]
    if not rows:
        raise Skipped("the ticket has no decisions")
    signed = [row for row in rows if row.get("signed") is not None and row.get("signature") is not None]
    if not signed:
        raise Skipped(f"none of the ticket's {len(rows)} decision(s) carries signed bytes (not stored)")
    return signed


def approval_signatures(b: Bundle) -> str:
    rows = decision_rows(b)
    for row in rows:
        signed_decision(b, row)
    return f"{len(rows)} decision(s), each signed by its approver for this ticket and payload"


def approval_state_version(b: Bundle) -> str:
    ticket = b.section("approval")["ticket"]
    for row in decision_rows(b):
        if parse_json(b64(row["signed"], "a decision's signed bytes")).get("state_version") != ticket.get(
            "state_version"
        ):
            raise Failed(f"decision {row.get('decision_id')} signs another state version than the ticket's")
    return f"every decision signs the state version {ticket.get('state_version')!r}"


def counts_toward_quorum(b: Bundle, row: dict[str, Any], ticket: dict[str, Any]) -> str | None:
    """The approver an APPROVE decision counts for, or None: it does not count (its signature or
    naming fails, it denies, its approver was not active then or not of the ticket's risk class or
    groups, or it was made outside the window of `ticket`, the one it signed, or after its own expiry)."""
    try:
        signed = signed_decision(b, row, ticket)
    except (Failed, ValueError):
        return None
    approver = b.data["keys"].get("approvers") or []
    who = next((a for a in approver if a.get("approver_id") == signed.get("approver_id")), None)
    at = signed.get("decided_at_ms")
    if who is None or signed.get("decision") != "APPROVE" or not isinstance(at, int):
        return None
    revoked = who.get("revoked_at")
    active = micros(who.get("registered_at"), "registered_at") <= at * 1000 and (
        revoked is None or micros(revoked, "revoked_at") > at * 1000
    )
    groups = ticket.get("approver_groups") or []
    fits = ticket.get("risk_class") in (who.get("risk_classes") or []) and (
        not groups or bool(set(groups) & set(who.get("groups") or []))
    )
    created, expires = micros(ticket.get("created_at"), "created_at"), micros(ticket.get("expires_at"), "expires_at")
    timely = created // 1000 <= at <= expires // 1000 and at <= signed.get("expires_at_ms", -1)
    return str(who["approver_id"]) if active and fits and timely else None


def edit_of(b: Bundle) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """An edited call's edit: the editor's decision row and the original ticket it signed (None:
    the call is no edit, or the edit's signed bytes are null)."""
    edit = b.data.get("edit")
    if edit is None:
        return None
    row, ticket = edit["decision"], edit["ticket"]
    return None if row.get("signed") is None or row.get("signature") is None else (row, ticket)


def held_without_approval(b: Bundle) -> None:
    """A bundle without an approval: Failed when its policy decision allowed the call with
    approvals and the call executed anyway, else Skipped (the call was never held)."""
    if b.data.get("execution") is not None:
        for row in b.data.get("decisions") or []:
            needed = row.get("approvals") if isinstance(row, dict) else None
            if row.get("stage") == "policy" and row.get("outcome") == "allow" and type(needed) is int and needed >= 1:
                raise Failed(f"policy required {needed} approvals; the bundle holds none")
    raise Skipped("the bundle has no approval")


def approval_quorum(b: Bundle) -> str:
    if b.data.get("approval") is None:
        held_without_approval(b)
    ticket, edit = b.section("approval")["ticket"], edit_of(b)
    if ticket.get("status") != "APPROVED":
        raise Skipped(f"the ticket is {ticket.get('status')}, not APPROVED: no quorum to count")
    try:
        rows = decision_rows(b) if b.section("approval")["decisions"] else []  # none: nobody approved
    except Skipped:
        if edit is None:
            raise
        rows = []
    judged = [(row, ticket) for row in rows] + ([edit] if edit is not None else [])
    counted = [who for row, on in judged if (who := counts_toward_quorum(b, row, on)) is not None]
    number = len(set(counted)) if ticket.get("distinct_approvers") else len(counted)
    needed = ticket.get("required_approvals")
    if not isinstance(needed, int) or number < needed:
        raise Failed(
            f"{number} valid approval(s) by active approvers of the ticket's class and groups; {needed} needed"
        )
    return f"{number} valid approval(s), {needed} needed"


def execution_once(b: Bundle) -> str:
    execution = b.section("execution")
    status = execution["status"]
    if status == "EXPIRED":  # past its deduplication window: the status it ended in is kept
        status = f"EXPIRED from {execution.get('expired_from')}"
    if status not in ("COMPLETED", "EXPIRED from COMPLETED"):
        raise Failed(f"the idempotency key is {status}, not COMPLETED")
    executed = [r for r in b.data["audit"]["rows"] if r.get("action") == "executed"]
    if len(executed) != 1:
        raise Failed(f"{len(executed)} audit rows record the execution, not exactly one")
    return "the key COMPLETED, and one audit row records its execution"


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


CHECKS: tuple[tuple[str, Callable[[Bundle], str]], ...] = (
    ("proposal.signature", proposal_signature),
    ("proposal.document", proposal_document),
    ("proposal.arguments", proposal_arguments),
    ("call.payload_hash", call_payload_hash),
    ("call.digest", call_digest),
    ("approval.signatures", approval_signatures),
    ("approval.state_version", approval_state_version),
    ("approval.quorum", approval_quorum),
    ("execution.once", execution_once),
    ("observation.signature", observation_signature),
    ("audit.rows", audit_rows),
    ("audit.inclusion", audit_inclusion),
    ("checkpoint.signature", checkpoint_signature),
    ("checkpoint.cosignatures", checkpoint_cosignatures),
    ("decisions.rederived", decisions_rederived),
)


# --- 6. The verdict, and the command line -------------------------------------------------------

MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def run(check: Callable[[Bundle], str], bundle: Bundle) -> tuple[str, str]:
    try:
        return OK, check(bundle)
    except Skipped as exc:
        return SKIPPED, str(exc)
    except Failed as exc:
        return FAILED, str(exc)
    except MALFORMED as exc:  # a field missing or of the wrong type: what it should prove does not hold
        return FAILED, f"the bundle is malformed where this check reads it ({type(exc).__name__}: {exc})"
    except Exception as exc:  # a hostile bundle deep in a parser: this check fails, the others go on
        return FAILED, f"the bundle could not be read where this check reads it ({type(exc).__name__})"


def verify(data: Any, deployment: Sequence[bytes] = (), witnesses: Sequence[str] = ()) -> dict[str, Any]:
    """The verdict on a parsed bundle: {"checks": [{"name", "status", "detail"}], "ok": bool}."""
    try:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise Failed(f"the document is not a {FORMAT} bundle")
        bundle: Bundle | str = Bundle(data, trusted_keys(data, deployment, witnesses))
    except (Failed, *MALFORMED) as exc:
        bundle = str(exc)
    checks = []
    for name, check in CHECKS:
        status, detail = (FAILED, bundle) if isinstance(bundle, str) else run(check, bundle)
        checks.append({"name": name, "status": status, "detail": detail})
    return {"checks": checks, "ok": all(c["status"] != FAILED for c in checks)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Verify a toolgate evidence bundle offline.")
    parser.add_argument("bundle", help="the bundle's file (- for standard input)")
    parser.add_argument("--json", action="store_true", help='print {"checks": [...], "ok": bool}')
    parser.add_argument(
        "--deployment-key", action="append", default=[], metavar="B64", help="trust only this deployment key"
    )
    parser.add_argument("--witness-vkey", action="append", default=[], metavar="VKEY", help="require this witness")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.buffer.read() if args.bundle == "-" else Path(args.bundle).read_bytes()
        pinned = [b64(k, "--deployment-key") for k in args.deployment_key]
        data = parse_json(text)
    except (OSError, ValueError, RecursionError, Failed) as exc:
        print(f"toolgate_evidence: the bundle cannot be read: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    verdict = verify(data, pinned, args.witness_vkey)
    if args.json:
        print(json.dumps(verdict, indent=2))
    else:
        for c in verdict["checks"]:
            print(f"{c['status'].upper() if c['status'] == FAILED else c['status']:8} {c['name']}: {c['detail']}")
        if not pinned or not args.witness_vkey:
            print(
                "note: keys not pinned (--deployment-key, --witness-vkey) are the bundle's own: they prove "
                "consistency, not who signed; compare them with the ones the deployment publishes"
            )
    return 0 if verdict["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
