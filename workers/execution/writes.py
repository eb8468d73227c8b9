"""What the recording step writes, as data: gathered call by call (recording.py), written in
one round trip by the driver (performer.py `write`).

Pure: rows as the store takes them, before any encoding; the driver encodes the outbox rows,
the stored responses' JSON and the audit chain's append.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgate.schemas.models import DeadLetter, ExecutionResult
from toolgate.store.audit_entry import Entry
from toolgate.topics.headers import Address


@dataclass(frozen=True)
class Quarantined:
    """A tool version to quarantine (store/quarantine.py), and the call that tripped the detector."""

    tool_name: str
    tool_version: str
    reason: str
    call_id: str
    tenant_id: str


@dataclass
class Writes:
    """The recording transaction's writes, in the order the driver sends them."""

    insert: list[dict[str, Any]] = field(default_factory=list)  # new keys, with their end
    settle: list[dict[str, Any]] = field(default_factory=list)  # existing keys' ends
    compensated: list[tuple[str | None, str, str]] = field(default_factory=list)
    compensation_failed: list[tuple[str, str]] = field(default_factory=list)
    spent: list[str] = field(default_factory=list)  # tickets whose operation ended
    reads: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)  # reads' first outcomes
    letters: list[tuple[DeadLetter, Address]] = field(default_factory=list)  # requests dead-lettered for an operator
    quarantine: list[Quarantined] = field(default_factory=list)  # tool versions caught writing READ_ONLY
    results: list[tuple[int, ExecutionResult]] = field(default_factory=list)  # (partition, result), held
    released: list[str] = field(default_factory=list)  # usage events of operations ended unspent (store/values.py)
    entries: list[Entry] = field(default_factory=list)
