"""Admitting re-entered edits (issue 52, part 3): the reads around edits.py's proof.

For a round's proposals that carry an approver's edit decision instead of an agent's signature:
the EDITED tickets their decisions name (store/edits.py), the approvers that signed them and the
digests their call_ids are bound to (toolgate.calls), in three statements; each proposal then
proven (edits.py) or dead-lettered with its bytes and audited collapsed, as any proposal that
proves nobody (workers/runtime/refusals.py).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.codec import DecodeError, codec
from toolgate.schemas.models import ApprovalDecision, StageRecord, TaxonomyClass, ToolProposal
from toolgate.store import edits as store_edits
from toolgate.workers.approval import tickets
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.handler import Inbound
from toolgate.workers.runtime.refusals import Refusal
from toolgate.workers.validation import admission, callers, limits
from toolgate.workers.validation.edits import ProvenEdit, prove
from toolgate.workers.validation.identity import Unproven


def decoded(proposal: ToolProposal) -> ApprovalDecision | None:
    try:
        return codec().decode(proposal.edit or b"", ApprovalDecision)
    except DecodeError:
        return None


async def admit(
    conn: AsyncConnection[Any], calls: list[Inbound[ToolProposal]], out: Emit, source: str
) -> list[tuple[Inbound[ToolProposal], ProvenEdit]]:
    """The re-entered edits proven; every other one dead-lettered here."""
    decisions = [decoded(c.model) for c in calls]
    named = [d for d in decisions if d is not None]
    held = await store_edits.edited(conn, sorted({d.approval_id for d in named})) if named else {}
    signers = await tickets.approvers(conn, sorted({d.approver_id for d in named})) if named else {}
    bound = await callers.bound_digests(conn, sorted({(c.model.tenant_id, c.model.call_id) for c in calls}))
    proven: list[tuple[Inbound[ToolProposal], ProvenEdit]] = []
    for call, decision in zip(calls, decisions, strict=True):
        ticket = held.get(decision.approval_id) if decision is not None else None
        request = codec().decode(ticket.request, StageRecord) if ticket is not None else None
        signer = signers.get(decision.approver_id) if decision is not None else None
        digest = bound.get((call.model.tenant_id, call.model.call_id))
        found = prove(call.model, decision, ticket, request, signer, digest)
        if isinstance(found, Unproven):
            call_id = limits.routable(call.model.call_id)
            out.dead_letter(call.origin, call.raw, TaxonomyClass.PERMISSION_DENIED, found.reason, call_id)
            out.refusals.append(Refusal(admission.refusal_entry(call.model, found), source))
            continue
        proven.append((call, found))
    return proven
