"""An audit entry, and how much of a record that proves nobody one may hold.

What a stage or an operator command appends to the audit log (store/audit.py chains
and signs it). The log is never pruned, and every value an unproven record carries (a call_id
header, an agent or approver id, a claimed tenant, a key id, a tool name) is whatever anyone who
may write a topic chose: every auditor takes such values through `bounded`, which needs no
validation internals. Pure, so that decisions may build entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The most characters an audited value taken from a record that proves nobody may have: as long
# as the longest such field a proven record may carry (workers/validation/limits.FIELD_LIMITS).
MAX_AUDITED = 128


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
