"""An audit entry, its chain hash, and how much of a record that proves nobody one may hold.

What a stage or an operator command appends to the audit log (store/audit.py chains and signs
it; `chain_hash` is here, pure, so an offline verifier of a call's evidence recomputes a row's
hash without the store's I/O). The log is never pruned, and every value an unproven record
carries (a call_id header, an agent or approver id, a claimed tenant, a key id, a tool name) is
whatever anyone who may write a topic chose: every auditor takes such values through `bounded`,
which needs no validation internals. Pure, so that decisions may build entries.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from toolgate.schemas.wire import canonical_json

# The most characters an audited value taken from a record that proves nobody may have: as long
# as the longest such field a proven record may carry (workers/validation/limits.FIELD_LIMITS).
MAX_AUDITED = 128
GENESIS = "0" * 64  # the first row's previous hash


@dataclass(frozen=True)
class Entry:
    stage: str
    action: str
    actor: str
    call_id: str | None = None
    tenant_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def bounded(value: str | None, limit: int = MAX_AUDITED) -> str | None:
    """A value from a record that proves nobody, as the audit log may hold it: as it is within
    `limit` characters, else None. Never cut short: a cut call_id could name another call."""
    return value if value is None or len(value) <= limit else None


def chain_hash(prev_hash: str, at: str, entry: Entry) -> str:
    """A row's hash: sha256 of the previous row's hash (hex) and the RFC 8785 JSON of the row, `at`
    the exact text of its time (UTC, microseconds)."""
    body = canonical_json(
        {
            "at": at,
            "stage": entry.stage,
            "action": entry.action,
            "actor": entry.actor,
            "call_id": entry.call_id,
            "tenant_id": entry.tenant_id,
            "detail": entry.detail,
        }
    )
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()
