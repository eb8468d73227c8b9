"""The evidence bundle's sections, from the rows store/evidence.py reads (docs/evidence.md, the
format `toolgate.evidence/v1`): pure, so the shape of every field is tested without a database.
Bytes go as standard base64; a field whose source was not stored (a row before migration 0036)
stays null, and the verifiers skip the check that needs it, by name."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from toolgate.schemas.codec import codec
from toolgate.schemas.models import Observation, StageRecord
from toolgate.store.rows import Decided
from toolgate.trust.deployment_keys import key_id_of
from toolgate.trust.signed_note import COSIGNATURE_V1, parse, vkey
from toolgate.trust.witness_keys import WitnessKey

FORMAT = "toolgate.evidence/v1"
Row = Mapping[str, Any]


def b64(raw: bytes | memoryview | None) -> str | None:
    return None if raw is None else base64.b64encode(bytes(raw)).decode()


def signing_document(call: Row | None) -> dict[str, Any] | None:
    """The agent's signing document, parsed (None: not stored, or not JSON)."""
    if call is None or call.get("signed_document") is None:
        return None
    try:
        document = json.loads(bytes(call["signed_document"]))
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def proposal(call: Row | None) -> dict[str, Any] | None:
    if call is None:
        return None
    return {
        "document": b64(call["signed_document"]),
        "signature": b64(call["signature"]),
        "proof": b64(call["signature_proof"]),
        "arguments": call["arguments"],
    }


def judged_call(decisions: Sequence[Decided]) -> dict[str, Any] | None:
    """The call as policy judged it: the Call inside the policy row's record, arguments unredacted."""
    for row in decisions:
        if row.stage == "policy" and row.record is not None:
            return codec().decode(bytes(row.record), StageRecord).call.model_dump(mode="json")
    return None


def call_section(call: Row | None, judged: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if call is None and judged is None:
        return None
    seen = judged or {}
    return {
        "arguments": seen.get("arguments"),
        "payload_hash": seen.get("payload_hash"),
        "proposal_digest": call["proposal_digest"] if call is not None else seen.get("proposal_digest"),
        "idempotency_key": seen.get("idempotency_key"),
        "request_hash": seen.get("request_hash"),
    }


def decisions(rows: Sequence[Decided]) -> list[dict[str, Any]]:
    out = []
    for row in rows:
        seen = asdict(row)
        del seen["tenant_id"], seen["call_id"]
        seen["record"] = b64(row.record)
        out.append(seen)
    return out


def approval(ticket: Row | None, signed: Sequence[Row]) -> dict[str, Any] | None:
    if ticket is None:
        return None
    return {"ticket": _ticket(ticket), "decisions": [_decision(d) for d in signed]}


def _ticket(row: Row) -> dict[str, Any]:
    return {**row, "approver_groups": list(row["approver_groups"] or [])}


def _decision(row: Row) -> dict[str, Any]:
    return {**row, "signed": b64(row["signed"]), "signature": b64(row["signature"])}


def edit(original: Row | None, decision: Row | None) -> dict[str, Any] | None:
    """An edited call's edit: the ticket it was edited from and the editor's decision on it (None:
    the call is no edit's re-entry, or the decision is gone)."""
    if original is None or decision is None:
        return None
    ticket = _ticket({k: v for k, v in original.items() if k != "edit_decision_id"})
    return {"ticket": ticket, "decision": _decision(decision)}


def execution(key: Row | None) -> dict[str, Any] | None:
    return None if key is None else dict(key)


def observations(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [
        {
            "topic": row["topic"],
            "key": b64(row["key"]),
            "value": b64(row["value"]),
            "headers": row["headers"],
            "at": row["at"],
            "decoded": decoded(bytes(row["value"])),
        }
        for row in rows
    ]


def decoded(value: bytes) -> dict[str, Any] | None:
    """An observation's value for reading (covered by no signature); None: it does not decode."""
    try:
        return codec().decode(value, Observation).model_dump(mode="json")
    except Exception:  # whatever a stored value is, the bundle carries its bytes; this is a convenience
        return None


def agent(key: Row | None) -> dict[str, Any] | None:
    return None if key is None else {**key, "public_key": b64(key["public_key"])}


def approvers(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [
        {**row, **{name: list(row[name] or []) for name in ("groups", "risk_classes", "tenants")}}
        | {"public_key": b64(row["public_key"])}
        for row in rows
    ]


def deployment(public_keys: Iterable[bytes]) -> list[dict[str, Any]]:
    return [{"key_id": key_id_of(raw), "public_key": b64(raw)} for raw in public_keys]


def witnesses(configured: Iterable[WitnessKey]) -> list[dict[str, str]]:
    return [{"name": w.name, "vkey": vkey(w.name, COSIGNATURE_V1, w.key.raw)} for w in configured]


def cosigned_note(note: str, lines: Iterable[str]) -> str:
    """The head's signed note with the witnesses' signature lines added."""
    return str(parse(note).with_lines("".join(lines)))


def audit_row(row: Row, leaf_index: int | None, path: Sequence[bytes] | None) -> dict[str, Any]:
    return {**row, "leaf_index": leaf_index, "inclusion": None if path is None else [h.hex() for h in path]}


def bundle(tenant_id: str, call_id: str, made_at: str, **sections: Any) -> dict[str, Any]:
    """The bundle: `sections` are keys, proposal, call, decisions, approval, edit, execution,
    observations and audit."""
    return {"format": FORMAT, "tenant_id": tenant_id, "call_id": call_id, "made_at": made_at, **sections}
