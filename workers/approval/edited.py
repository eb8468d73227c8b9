"""Approve with edit at approval-wait (issue 52, part 3): an edit decision checked against the
held call's contract, and the edited call it re-enters. Pure.

`check` reads the decision's edited arguments (canonical JSON of an object, as the approver
signed them) and asks contracts/edits.py whether they only narrow the held call's; `judge`
(decision.py) refuses the decision with the typed reason if not, and the ticket stays PENDING.
A counted edit closes the ticket as EDITED, and `reentry` is the edited call as it goes back to
tool.proposals: the held call's identity (call_id, principal, run, logical operation, tool
version, idempotency key, deadline) with the edited arguments and, in place of an agent's
signature, the approver's signed decision, which validation proves against the EDITED ticket
(workers/validation/edits.py). The edited call keeps the held call's idempotency key: one
logical operation, at most one effect (the held payload never reserved the key; it never runs).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.contracts.edits import Edited, diff, more_approvals, widening
from toolgate.refusal import Refusal
from toolgate.schemas.codec import codec
from toolgate.schemas.identity import identity_of
from toolgate.schemas.models import ApprovalDecision, StageRecord, ToolProposal
from toolgate.schemas.wire import canonical_json
from toolgate.workers.approval.decision import edit_of


def check(decision: ApprovalDecision, contract: Contract, held: Mapping[str, Any]) -> Edited | Refusal:
    """What the decision's edit makes of the held arguments, or why it is refused."""
    text = decision.edited_arguments or ""
    try:
        arguments = json.loads(text)
    except ValueError:
        return Refusal("edit_not_an_object", "the edited arguments are not JSON")
    if not isinstance(arguments, dict):
        return Refusal("edit_not_an_object", "the edited arguments are not a JSON object")
    if canonical_json(arguments) != text:
        return Refusal("edit_not_canonical", "the edited arguments are not in canonical JSON (RFC 8785)")
    widens = widening(contract, held, arguments)
    return widens if widens is not None else Edited(arguments, diff(held, arguments))


def reentry(request: StageRecord, decision: ApprovalDecision, now_ms: int) -> ToolProposal:
    """The edited call, for tool.proposals (keyed by its run, as the agent's proposal was)."""
    call = request.call
    identity = identity_of(call)
    identity["created_at_ms"] = now_ms  # proposed now: fresh at validation
    return ToolProposal(
        **identity,
        logical_operation_id=call.logical_operation_id,
        tool_name=call.tool_name,
        tool_version=call.tool_version,
        arguments=decision.edited_arguments or "",
        idempotency_key=call.idempotency_key,
        deadline_ms=call.deadline_ms,
        repair_attempt=call.repair_attempt,
        dry_run=False,
        compensation_of=call.compensation_of,
        edit=codec().encode(decision),
    )


def editor_vote(record: StageRecord, approval_id: str, now_ms: int) -> dict[str, Any]:
    """The editor's approval of the edited call, counted once on its own ticket (a row of the
    store's approvals.RECORD_DECISIONS: the edit decision's id, marked as this ticket's). It is
    signed by nobody (`signed` and `signature` NULL): the editor's signed edit decision is the
    held ticket's row under its own decision_id, and edits link the two tickets."""
    edit = edit_of(record) or {}
    return {
        "decision_id": f"{edit.get('decision_id')}.edited",
        "approval_id": approval_id,
        "approver_id": edit.get("edited_by"),
        "verdict": "APPROVE",
        "reason": f"edited from {edit.get('approval_id')}",
        "decided_at_ms": now_ms,
        "signed": None,
        "signature": None,
        "public_key": None,
    }


def wider(record: StageRecord, held_required: int | None) -> Refusal | None:
    """Policy asks more approvals of the edited call than of the held one (None: it does not)."""
    return more_approvals(held_required if held_required is not None else 0, record.required_approvals)
