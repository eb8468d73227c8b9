"""The rows the store reads that a pure decision judges as they are: a module of types only, so a
decision may import them without the store's I/O. A key's row as phase A reads it under lock
(store/keys.py `lock`, judged by workers/execution/idempotency.py), and an approval ticket as
execution clears a call by it (store/approvals.py `clearances`, judged by
workers/execution/clearance.py), and an open ticket as approval-wait judges a decision on it
(store/approvals.py `tickets`, judged by workers/approval/decision.py) with the approver who
decided (store/approvers.py `deciding`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgate.states import KeyStatus, TicketStatus


@dataclass(frozen=True, slots=True)
class KeyRow:
    """An existing key's row, locked until the transaction ends."""

    status: KeyStatus
    request_hash: str
    call_id: str
    attempt: int
    lease_owner: str | None
    lease_until_ms: int | None
    response: dict[str, Any] | None
    error_code: str | None
    expires_at_ms: int
    expired_from: KeyStatus | None = None  # the status an EXPIRED key had


@dataclass(frozen=True, slots=True)
class Ticket:
    """An approval ticket as Postgres has it, with the approvals that still count."""

    approval_id: str
    status: TicketStatus
    call_id: str
    tenant_id: str
    tool_name: str
    tool_version: str
    payload_hash: str
    required_approvals: int
    state_version: str | None
    consumed_by: str | None
    approvers: int  # distinct approvers who approved, still active, of its tenant, not its requester
    spent: bool = False  # the operation it released reached a final state


@dataclass(frozen=True, slots=True)
class OpenTicket:
    """A ticket as approval-wait judges a decision on it: with the approvers that approved and
    that decided, and the decision ids already counted."""

    approval_id: str
    tenant_id: str
    tool_name: str
    tool_version: str
    payload_hash: str
    risk_class: str
    required_approvals: int
    status: TicketStatus
    expires_at_ms: int
    approved_by: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()
    used_decisions: frozenset[str] = field(default_factory=frozenset)
    groups: tuple[str, ...] = ()  # the approver groups reached so far; empty: any allowed approver
    state_version: str | None = None  # the target's state the approver was shown
    trace_id: str = ""  # the held call's trace, as its packet names it
    requested_by: str = ""  # the held call's requesting user (its principal's user_id)
    requesting_agent: str = ""  # the agent that proposed the held call (the one that may withdraw it)


@dataclass(frozen=True, slots=True)
class Decided:
    """One stage's decision on one call as toolgate.call_decisions records it (store/call_decisions.py),
    made by the stages' pure record builders (workers/policy/witness.py, workers/validation/recorded.py).
    A policy row names the call by `record`, the StageRecord's bytes as the stage read it (migration
    0029); readers open it into `call` and validation's pass (witness.py `opened`)."""

    tenant_id: str
    call_id: str
    stage: str  # 'validation' or 'policy'
    decided_at_ms: int
    tool_name: str
    tool_version: str
    contracts_digest: str | None
    policy_digest: str | None
    outcome: str  # 'pass', 'allow' or 'refuse'
    taxonomy_class: str | None = None
    code: str | None = None
    rule: str | None = None
    approvals: int | None = None
    approver_groups: list[str] = field(default_factory=list)
    call: dict[str, Any] | None = None
    facts: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    record: bytes | None = None


@dataclass(frozen=True, slots=True)
class Approver:
    """An approver as approval-wait judges its decisions."""

    approver_id: str
    public_key: bytes
    risk_classes: list[str]
    active: bool
    groups: list[str]
    tenants: list[str]  # the tenants it decides for; none: it decides for no one
    acts_as: list[str]  # the user ids it acts as: never counted on a call one of them requested
