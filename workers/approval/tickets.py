"""Approval-wait's reads and writes of tickets and approvers (decision.py judges them), through
the store (store/approvals.py, store/approvers.py).

`lock` takes the tickets FOR UPDATE in approval_id order, so two decision rounds on the same
tickets never deadlock; `load` reads them with their decisions and the held call (whose
principal names the requesting user, whom no approver acting as them may decide for);
`approvers` reads the approvers that decided, with the users each acts as; `requesters` the
agents that withdrew their calls, with their keys. `insert` writes new
tickets (an existing one is left as it is and not returned); `record_decisions` and `close`
write what decisions did to them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.edits import edited_hash
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, StageRecord
from toolgate.store import agents, approvals, edits
from toolgate.store import approvers as store_approvers
from toolgate.trust.signing import signed_bytes
from toolgate.workers.approval import withdrawal
from toolgate.workers.approval.decision import Approver, Ticket
from toolgate.workers.approval.packet import Opening


async def lock(conn: AsyncConnection[Any], ids: list[str]) -> None:
    await approvals.lock(conn, ids)


async def load(conn: AsyncConnection[Any], ids: list[str]) -> tuple[dict[str, Ticket], dict[str, StageRecord]]:
    """The tickets, each naming the user and the agent that requested its call, and the call each
    one holds."""
    tickets: dict[str, Ticket] = {}
    requests: dict[str, StageRecord] = {}
    for ticket, encoded in await approvals.tickets(conn, ids):
        request = codec().decode(encoded, StageRecord)
        principal = request.call.principal
        tickets[ticket.approval_id] = replace(
            ticket, requested_by=principal.user_id, requesting_agent=principal.agent_id
        )
        requests[ticket.approval_id] = request
    return tickets, requests


async def approvers(conn: AsyncConnection[Any], ids: list[str]) -> dict[str, Approver]:
    return {r.approver_id: r for r in await store_approvers.deciding(conn, ids)}


async def requesters(conn: AsyncConnection[Any], agent_ids: list[str]) -> dict[str, withdrawal.Requester]:
    """The agents that sent withdrawals, with their active keys."""
    rows = await agents.with_keys(conn, agent_ids)
    return withdrawal.requesters([(r.agent_id, r.tenant_id, r.active, r.public_key, r.key_active) for r in rows])


def ticket_row(opened: Opening) -> dict[str, Any]:
    """A new ticket as a row of the store's approvals.INSERT."""
    request, packet = opened.request, opened.packet
    return {
        "approval_id": packet.approval_id,
        "call_id": request.call.call_id,
        "tenant_id": request.call.tenant_id,
        "run_id": request.call.run_id,
        "tool_name": request.call.tool_name,
        "tool_version": request.call.tool_version,
        "payload_hash": request.call.payload_hash,
        "risk_class": packet.risk_class,
        "required_approvals": request.required_approvals,
        "home_partition": request.call.home_partition,
        "request": base64.b64encode(codec().encode(request)).decode(),
        "packet": packet.model_dump(mode="json"),
        "expires_at_ms": packet.expires_at_ms,
        "approver_groups": packet.approver_groups,
        "escalate_at_ms": opened.escalate_at_ms,
        "state_version": packet.state_version,
    }


async def insert(conn: AsyncConnection[Any], opened: Iterable[Opening]) -> set[str]:
    """Write the tickets that do not exist yet; the approval_ids of those written."""
    return await approvals.insert(conn, [ticket_row(o) for o in opened])


def decision_row(decision: ApprovalDecision, public_key: bytes | None = None) -> dict[str, Any]:
    """A counted decision as a row of the store's approvals.RECORD_DECISIONS, with the canonical
    bytes its signature was verified over (signing.signed_bytes: an approver's decision and an
    agent's withdrawal alike), the signature and the approver's key that verified it (None for a
    withdrawal: the agent's keys are kept by the agent registry), base64: the evidence an auditor
    checks again, with the key as it was registered then."""
    return {
        "decision_id": decision.decision_id,
        "approval_id": decision.approval_id,
        "approver_id": decision.approver_id,
        "verdict": str(decision.decision),
        "reason": decision.reason,
        "decided_at_ms": decision.decided_at_ms,
        "signed": base64.b64encode(signed_bytes(decision)).decode(),
        "signature": base64.b64encode(decision.signature).decode(),
        "public_key": None if public_key is None else base64.b64encode(public_key).decode(),
    }


async def record_decisions(
    conn: AsyncConnection[Any], counted: list[ApprovalDecision], keys: Mapping[str, bytes]
) -> None:
    """Record the counted decisions, each with its approver's key in `keys` (by approver id)."""
    await approvals.record_decisions(conn, [decision_row(d, keys.get(d.approver_id)) for d in counted])


async def mark_edited(conn: AsyncConnection[Any], decisions: list[ApprovalDecision]) -> None:
    """Record on each EDITED ticket who edited it, by which decision, and the edited payload."""
    if decisions:
        rows = [(d.approval_id, d.approver_id, d.decision_id, edited_hash(d)) for d in decisions]
        await edits.mark_edited(conn, rows)


async def close(conn: AsyncConnection[Any], decided: list[Ticket]) -> None:
    """Set the status the decisions gave these tickets, on those still PENDING in Postgres."""
    if decided:
        await approvals.close(conn, [t.approval_id for t in decided], [str(t.status) for t in decided])
