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
from toolgate.schemas.models import ApprovalDecision, ApprovalRequest
from toolgate.topics.headers import edge_headers, new_traceparent
from toolgate.trust.signing import decision_document, signed_bytes, withdrawer

VALID_FOR_S = 300


def withdrawal(packet: ApprovalRequest, agent_id: str, reason: str | None, now_ms: int) -> ApprovalDecision:
    """The unsigned withdrawal of the call `packet` holds, by its agent: the decision document an
    approver's denial is, named after the agent."""
    return decision_document(packet, withdrawer(agent_id), False, reason, f"wdr_{random_hex(16)}", now_ms, VALID_FOR_S)


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
