"""Payload hashes and idempotency keys, as the seeds define them.

payload_hash   sha256 over the RFC 8785 canonical JSON of the validated arguments (defaults
               applied; nothing incidental such as trace ids), so a retry of the same call
               hashes the same and any change of what would be executed does not.
idempotency key  SHA256(workflow_id, run_id, tenant_id, user_id, tool_name, tool_version,
               logical_operation_id, payload_hash), or the caller's own key, which is then
               bound to its request hash (reusing it for anything else is a
               SIGNATURE_MISMATCH).
request hash   SHA256(tenant, tool, version, payload_hash): what a key is bound to, so the same
               key on another tool or version with the same arguments is not the same request.
provider key   SHA256(tenant, tool, version, key): the key a provider sees (header and status
               query path), so tenants never share a provider's key space and a caller's key
               never reaches a URL as it was written. Statements and callables get it as
               `ctx.operation_key`, never the caller's key: an id derived from it is the
               tenant's own.
usage event    what budgets and rate limits count: an operation by (tenant, tool, version,
               payload hash, key), counted once however often it is retried; a read by its
               call (tenant, tool, version, payload hash, call_id), once however often that
               call is sent again (a copy is answered from its first outcome: it runs no more).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from toolgate.schemas.models import Call
from toolgate.schemas.wire import canonical_json

PREFIX = "sha256:"
# A caller's idempotency key: printable, no separators a URL or a header could misread.
CALLER_KEY = re.compile(r"[A-Za-z0-9._:@+=-]{1,255}")


def _digest(*parts: str) -> str:
    # Length-prefixed, so no two different tuples can concatenate to the same bytes.
    material = b"".join(len(p.encode()).to_bytes(4, "big") + p.encode() for p in parts)
    return hashlib.sha256(material).hexdigest()


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
    return "tg_" + _digest(*parts)


def fingerprint(value: str, length: int = 12) -> str:
    """A short, non-reversible fingerprint of a key or hash for packets, spans and logs."""
    return hashlib.sha256(value.encode()).hexdigest()[:length]


def idempotency_key_for(caller_key: str | None, call: Mapping[str, Any], user_id: str) -> str:
    """The caller's key if it gave one, else the seeds' derived key of a call (its fields, by a
    Call's names, and its principal's user): validation derives it once, the call carries it."""
    if caller_key:
        return caller_key
    return derive_idempotency_key(
        workflow_id=call["workflow_id"],
        run_id=call["run_id"],
        tenant_id=call["tenant_id"],
        user_id=user_id,
        tool_name=call["tool_name"],
        tool_version=call["tool_version"],
        logical_operation_id=call["logical_operation_id"],
        payload_hash=call["payload_hash"],
    )


def request_hash(tenant_id: str, tool_name: str, tool_version: str, payload_hash: str) -> str:
    """What an idempotency key is bound to."""
    return PREFIX + _digest(tenant_id, tool_name, tool_version, payload_hash)


def provider_key(tenant_id: str, tool_name: str, tool_version: str, key: str) -> str:
    """The idempotency key a provider is given for a call's key."""
    return "tgk_" + _digest(tenant_id, tool_name, tool_version, key)


def operation_event(call: Call) -> str:
    """A mutation's usage event: the same operation retried is counted once (a Call)."""
    return "op_" + _digest(call.tenant_id, call.tool_name, call.tool_version, call.payload_hash, call.idempotency_key)


def usage_events(call: Call) -> tuple[str, str]:
    """Both events a call may be counted under, its operation's and its own: what a release of
    its value budgets' reservation looks for (store/values.py; the one not counted finds nothing)."""
    return operation_event(call), read_event(call)


def read_event(call: Call) -> str:
    """A read's usage event: the same call sent again (a client's resend, a captured copy
    replayed within its window) is counted once."""
    return "read_" + _digest(call.tenant_id, call.tool_name, call.tool_version, call.payload_hash, call.call_id)
