"""Records an older release wrote in a shape Avro schema resolution cannot bring to today's.

Resolution fills a field the writer did not know from the reader's default and drops one the
reader no longer has, but it cannot move fields into a nested record. Release 0.2.0 did that:
the call's own fields went from StageRecord into its `call` (a Call), and the idempotency key
and request hash, derived by each stage that needed them, became fields of the call derived
once. A StageRecord of 0.1.0 (in flight on an internal topic during an upgrade, or kept in
Postgres with a held call's ticket or an outbox row) is read with its own schema and nested
here, its key and request hash derived as 0.1.0's stages derived them, so a call held across
the upgrade is still released, and one in flight still runs once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolgate.schemas.hashing import idempotency_key_for, request_hash

Record = dict[str, Any]

# The stage's own fields of a StageRecord; every other field of a 0.1.0 record is the call's.
STAGE_FIELDS = ("traceparent", "required_approvals", "approval_id", "approvers", "attempt", "warnings", "decisions")


def nest_call(record: Record) -> Record:
    """A 0.1.0 StageRecord (a dict of its fields) in today's shape."""
    call = {name: value for name, value in record.items() if name not in STAGE_FIELDS}
    call["idempotency_key"] = idempotency_key_for(call["idempotency_key"], call, call["principal"]["user_id"])
    call["request_hash"] = request_hash(
        call["tenant_id"], call["tool_name"], call["tool_version"], call["payload_hash"]
    )
    return {**{name: record[name] for name in STAGE_FIELDS}, "call": call}


def upgrade_of(schema: Mapping[str, Any]) -> Callable[[Record], Record] | None:
    """How a record written with `schema`, an older release's, is brought to today's shape
    after it is read with that schema; None when Avro schema resolution does it."""
    names = {field["name"] for field in schema["fields"]}
    if schema["name"] in ("StageRecord", "toolgate.StageRecord") and "call" not in names:
        return nest_call
    return None
