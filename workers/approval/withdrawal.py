"""Withdrawals: a held call's own agent takes its proposal back (an MCP `tasks/cancel`). Pure.

A withdrawal is an `ApprovalDecision` on `tool.approvals.decisions` like any other: verdict DENY,
bound to the ticket's payload hash, tool and version, signed over the same canonical decision
document (toolgate/trust/signing.py) — but by the agent that proposed the call, with one of its
registered keys (`toolgate.agent_keys`), and naming it as `agent:<agent_id>` where an approver
id stands (no approver id has a colon: `toolgate/trust/agent_keys.py` `check_name`). It proves
the requester, not a topic: approval-wait counts it only when

    what it is checked against                        refused as
    the ticket exists                                 unknown_approval
    its decision id is new                            duplicate_decision (a no-op)
    its verdict is DENY                               withdrawal_not_deny
    the agent is registered and active                unknown_approver
    it verifies under one of the agent's active keys  bad_signature
    the agent proposed the held call, in its tenant   not_the_requester
    the ticket is still PENDING                       approval_closed
    the payload hash, tool and version are the call's payload_mismatch
    it has not expired                                decision_expired

Counted, it closes the ticket DENIED like a denial (its decision recorded by `agent:<agent_id>`):
the call ends on tool.results with `approval_withdrawn` and nothing runs. Approvals that arrive
after it find the ticket closed (approval_closed), and execution, which releases only an
APPROVED ticket (workers/execution/clearance.py), never runs it. A withdrawal that comes after
enough approvals finds the ticket APPROVED: too late, refused, and the call runs as approved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolgate.refusal import Refusal
from toolgate.schemas.models import ApprovalDecision, Verdict
from toolgate.states import TicketStatus
from toolgate.trust.signing import verify, withdrawer, withdrawing_agent
from toolgate.workers.approval.decision import Counted, NoOp, Then, Ticket, Transition, applied, open_for

ERROR_CODE = "approval_withdrawn"
agent_of = withdrawing_agent


@dataclass(frozen=True)
class Requester:
    """A registered agent as a withdrawal is checked against it."""

    agent_id: str
    tenant_id: str
    active: bool
    public_keys: tuple[bytes, ...]  # its active keys


def judge(
    decision: ApprovalDecision, ticket: Ticket | None, requester: Requester | None, now_ms: int
) -> Counted | NoOp | Refusal:
    """Whether a withdrawal counts (the module docstring's table, in its order)."""
    if ticket is None:
        return Refusal("unknown_approval", f"no approval {decision.approval_id} is waiting")
    if decision.decision_id in ticket.used_decisions:
        return NoOp("duplicate_decision", f"decision {decision.decision_id} was already recorded")
    if decision.decision is not Verdict.DENY:
        return Refusal("withdrawal_not_deny", "a withdrawal takes a proposal back; it approves nothing")
    if requester is None or not requester.active:
        return Refusal("unknown_approver", f"{decision.approver_id} is not a registered, active agent")
    if not any(verify(decision, key) for key in requester.public_keys):
        return Refusal("bad_signature", f"the signature does not verify against {requester.agent_id}'s keys")
    if requester.agent_id != ticket.requesting_agent or requester.tenant_id != ticket.tenant_id:
        return Refusal("not_the_requester", f"{requester.agent_id} did not propose the call {ticket.approval_id} holds")
    refused = open_for(decision, ticket, "withdrawal")
    if refused is not None:
        return refused
    if decision.expires_at_ms < now_ms:
        return Refusal("decision_expired", "the withdrawal expired before it arrived")
    return Counted(TicketStatus.DENIED, ticket.approved_by)


def transition(
    decision: ApprovalDecision, ticket: Ticket | None, requester: Requester | None, now_ms: int
) -> Transition:
    """A withdrawal applied to its ticket: audited as withdrawal_counted|refused|noop."""
    verdict = judge(decision, ticket, requester, now_ms)
    return applied(decision, ticket, verdict, kind="withdrawal", denied=Then.WITHDRAW)


def requesters(rows: Sequence[tuple[str, str, bool, bytes | None, bool | None]]) -> dict[str, Requester]:
    """Agents from their rows (agent_id, tenant_id, active, a key, whether it is active), one row
    per key as the store reads them."""
    keys: dict[str, list[bytes]] = {}
    seen: dict[str, tuple[str, bool]] = {}
    for agent_id, tenant_id, active, key, key_active in rows:
        seen[agent_id] = (tenant_id, active)
        keys.setdefault(agent_id, [])
        if key is not None and key_active:
            keys[agent_id].append(bytes(key))
    return {a: Requester(a, t, active, tuple(keys[a])) for a, (t, active) in seen.items()}


def message(agent_id: str, reason: str | None) -> str:
    """What the call's final observation says."""
    return f"the requesting agent {agent_id} withdrew the call" + (f": {reason}" if reason else "")


__all__ = ["ERROR_CODE", "Requester", "agent_of", "judge", "message", "requesters", "transition", "withdrawer"]
