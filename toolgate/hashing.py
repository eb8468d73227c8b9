"""Payload hashes and idempotency keys, as the seeds define them.

payload_hash   sha256 over the RFC 8785 canonical JSON of the validated arguments (defaults
               applied; nothing incidental such as trace ids), so a retry of the same call
               hashes the same and any change of what would be executed does not.
idempotency key  SHA256(workflow_id, run_id, tenant_id, user_id, tool_name, tool_version,
               logical_operation_id, payload_hash), or the caller's own key, which is then
               bound to the payload hash (reusing it with other arguments is a
               SIGNATURE_MISMATCH).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from toolgate.schemas.wire import canonical_json

PREFIX = "sha256:"


def payload_hash(arguments: Mapping[str, Any]) -> str:
    return PREFIX + hashlib.sha256(canonical_json(dict(arguments)).encode()).hexdigest()


def derive_idempotency_key(
    *,
    workflow_id: str,
    run_id: str,
    tenant_id: str,
    user_id: str,
    tool_name: str,
    tool_version: str,
    logical_operation_id: str,
    payload_hash: str,
) -> str:
    parts = [workflow_id, run_id, tenant_id, user_id, tool_name, tool_version, logical_operation_id, payload_hash]
    # Length-prefixed, so no two different tuples can concatenate to the same bytes.
    material = b"".join(len(p.encode()).to_bytes(4, "big") + p.encode() for p in parts)
    return "tg_" + hashlib.sha256(material).hexdigest()


def fingerprint(value: str, length: int = 12) -> str:
    """A short, non-reversible fingerprint of a key or hash for packets, spans and logs."""
    return hashlib.sha256(value.encode()).hexdigest()[:length]


def idempotency_key_for(record: Any) -> str:
    """The caller's key if it gave one, else the seeds' derived key (a StageRecord)."""
    if record.idempotency_key:
        return str(record.idempotency_key)
    return derive_idempotency_key(
        workflow_id=record.workflow_id,
        run_id=record.run_id,
        tenant_id=record.tenant_id,
        user_id=record.principal.user_id,
        tool_name=record.tool_name,
        tool_version=record.tool_version,
        logical_operation_id=record.logical_operation_id,
        payload_hash=record.payload_hash,
    )
