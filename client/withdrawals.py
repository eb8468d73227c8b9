"""An agent withdraws a call it proposed that is held for approval (the MCP door's `tasks/cancel`).

The withdrawal is a DENY decision on the call's ticket, named `agent:<agent_id>` and signed with
the agent's own key (the one it proposes with) over the canonical decision document approvers
sign (toolgate/trust/signing.py). Approval-wait counts it only when that key is a registered,
active key of the agent that proposed the held call (workers/approval/withdrawal.py): a topic
alone proves nothing. Counted, the call ends with one final observation, `approval_withdrawn`,
and nothing runs.
"""

from __future__ import annotations

import time

from toolgate.client.agent import ToolgateClient
from toolgate.client.calls import random_hex
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest, Verdict
from toolgate.topics.headers import edge_headers, new_traceparent
from toolgate.trust.signing import signed_bytes, withdrawer

VALID_FOR_S = 300


def withdrawal(packet: ApprovalRequest, agent_id: str, reason: str | None, now_ms: int) -> ApprovalDecision:
    """The unsigned withdrawal of the call `packet` holds, by its agent."""
    return ApprovalDecision(
        decision_id=f"wdr_{random_hex(16)}",
        approval_id=packet.approval_id,
        decision=Verdict.DENY,
        approver_id=withdrawer(agent_id),
        tool_name=packet.tool_name,
        tool_version=packet.tool_version,
        payload_hash=packet.payload_hash,
        reason=reason,
        decided_at_ms=now_ms,
        expires_at_ms=now_ms + VALID_FOR_S * 1000,
        state_version=packet.state_version,
        trace_id=packet.trace_id,
        approval_scope=None,
        signature=b"",
    )


def withdraw(client: ToolgateClient, packet: ApprovalRequest, agent_id: str, reason: str | None) -> ApprovalDecision:
    """Sign the withdrawal with the agent's key in the client's keyring and publish it."""
    signer = client.signer(agent_id)
    unsigned = withdrawal(packet, agent_id, reason, int(time.time() * 1000))
    signed = unsigned.model_copy(update={"signature": signer.key.sign(signed_bytes(unsigned))})
    c = codec()
    headers = edge_headers(new_traceparent(), packet.call_id, packet.tenant_id, c.fingerprint_of(ApprovalDecision))
    client.publish_raw(client.topics.approvals_decisions, signed.approval_id.encode(), c.encode(signed), headers)
    client.flush()
    return signed
