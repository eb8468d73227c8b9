"""Approve with edit at validation (issue 52, part 3): proving a re-entered edit. Pure.

An edited call comes back on tool.proposals with no agent signature: approval-wait re-entered it
(workers/approval/edited.py), carrying the approver's signed decision. It is not believed because
of its topic. It is proven, or dead-lettered as proving nobody, by:

    the check                                                      refused (Unproven) as
    the decision decodes, is an APPROVE with edited arguments      edit_not_a_decision
    its approver is registered (active or revoked since: the edit  edit_unknown_approver,
      was judged while it was active) and signed it, under the     edit_bad_signature
      key approval-wait counted it with (or, for an edit counted
      before that key was kept, the key registered now)
    the ticket it names was closed EDITED by exactly this decision edit_not_accepted
      over exactly these edited arguments (Postgres:
      toolgate.approvals, written by approval-wait in the transaction
      that judged the edit; it never closes one for an edit that
      widens)
    it names that ticket's payload hash, call and tenant, and its  edit_of_another_call,
      approver decides for that tenant                              edit_approver_not_for_tenant
    the proposal's arguments are the decision's edited arguments   edit_arguments_mismatch
    every other field is the held call's (principal, run, logical  edit_identity_mismatch
      operation, tool version, idempotency key, deadline)
    the held call's proposal digest is the one toolgate.calls      edit_original_unproven
      binds its call_id to (validation registers a call_id only
      once its agent's signature verified)

The held call is validation's own record of the original: the ticket keeps the StageRecord that
validation admitted after its agent's signature verified, and toolgate.calls the digest that
signature proved. The agent's signature itself is not checked again: toolgate keeps no copy of a
proposal's signature, key id and argument text past validation, so the proof of the original is
validation's record of having checked it, in two tables, against the approver's signature here.

An approver revoked after approval-wait accepted the edit does not make its re-entry unproven:
Postgres holds the acceptance, and dead-lettering the re-entry would leave the call with no final
answer. The edited call goes on and needs its own approvals; execution counts only active
approvers (store/approvals.py CLEARANCE), so a revoked editor's vote runs nothing, and the call
ends approved by others, or expired. Nor does a key rotated in between: the signature is checked
under the key toolgate.approval_decisions keeps with the counted decision, the one approval-wait
verified it with. (An old key can sign nothing new that passes here: the ticket must have been
closed EDITED by this very decision, over these very arguments.)

A proven edit is the held call's proposal with the edited arguments: it is answered under the held
call's digest, so the agent's one final observation is the edited call's, carrying who edited it
and the argument diff (contracts/edits.py `note`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from toolgate.contracts.edits import diff, edited_hash, note
from toolgate.schemas.models import ApprovalDecision, StageRecord, ToolProposal, Verdict
from toolgate.store.edits import EditedTicket
from toolgate.trust.signing import verify
from toolgate.workers.approval.decision import Approver
from toolgate.workers.validation.identity import Unproven

SAME = ("principal", "workflow_id", "run_id", "logical_operation_id", "tool_name", "tool_version")


@dataclass(frozen=True)
class ProvenEdit:
    """A re-entered edit, proven: the held call's proposal with the edited arguments."""

    proposal: ToolProposal
    digest: str  # the held call's proposal digest
    approval_id: str  # the ticket the edit closed
    edited_by: str
    decision_id: str
    note: str  # the warning the edited call's observation carries


def prove(
    proposal: ToolProposal,
    decision: ApprovalDecision | None,
    ticket: EditedTicket | None,
    held: StageRecord | None,
    approver: Approver | None,
    bound_digest: str | None = None,
) -> ProvenEdit | Unproven:
    """The table of the module docstring, in order; `bound_digest`: the digest toolgate.calls
    binds the proposal's tenant and call_id to (None: none)."""
    if decision is None or decision.decision is not Verdict.APPROVE or decision.edited_arguments is None:
        return Unproven("edit_not_a_decision", "the re-entered edit carries no signed edit decision")
    if approver is None:
        return Unproven("edit_unknown_approver", f"{decision.approver_id} is not a registered approver")
    if not verify(decision, _counted_under(ticket, decision) or approver.public_key):
        return Unproven("edit_bad_signature", "the edit decision's signature does not verify")
    if ticket is None or held is None or ticket.edit_decision_id != decision.decision_id:
        return Unproven("edit_not_accepted", f"no ticket was closed EDITED by decision {decision.decision_id}")
    if ticket.edited_payload_hash != edited_hash(decision):
        return Unproven("edit_not_accepted", "the edited arguments are not those approval-wait accepted")
    if (ticket.payload_hash, ticket.call_id, ticket.tenant_id) != (
        decision.payload_hash,
        proposal.call_id,
        proposal.tenant_id,
    ):
        return Unproven("edit_of_another_call", "the edit decision names another call than the re-entered one")
    if ticket.tenant_id not in approver.tenants:
        return Unproven("edit_approver_not_for_tenant", f"{approver.approver_id} decides nothing for this tenant")
    if proposal.arguments != decision.edited_arguments:
        return Unproven("edit_arguments_mismatch", "the arguments are not the ones the approver signed")
    return _as_held(proposal, decision, ticket, held, bound_digest)


def _counted_under(ticket: EditedTicket | None, decision: ApprovalDecision) -> bytes | None:
    """The key approval-wait verified `decision` with when it closed `ticket` EDITED, if kept."""
    if ticket is None or ticket.edit_decision_id != decision.decision_id:
        return None
    return ticket.counted_under


def _as_held(
    proposal: ToolProposal, decision: ApprovalDecision, ticket: EditedTicket, held: StageRecord, bound: str | None
) -> ProvenEdit | Unproven:
    call = held.call
    same = all(getattr(proposal, name) == getattr(call, name) for name in SAME)
    if not same or (proposal.idempotency_key, proposal.deadline_ms) != (call.idempotency_key, call.deadline_ms):
        return Unproven("edit_identity_mismatch", "the re-entered edit is not the held call with other arguments")
    if proposal.dry_run or proposal.compensation_of != call.compensation_of:
        return Unproven("edit_identity_mismatch", "the re-entered edit is not the held call with other arguments")
    if not call.proposal_digest or bound != call.proposal_digest:
        return Unproven("edit_original_unproven", "the held call is not the proposal its call_id is bound to")
    changes = diff(call.arguments, json.loads(decision.edited_arguments or "{}"))
    admitted = proposal.model_copy(update={"principal": call.principal, "edit": None})
    said = note(ticket.approval_id, decision.approver_id, changes)
    return ProvenEdit(
        admitted, call.proposal_digest, ticket.approval_id, decision.approver_id, decision.decision_id, said
    )
