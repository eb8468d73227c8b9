"""Who a call is, as every record about it repeats it: the one place that copies it.

A proposal, the Call each gate passes on in its StageRecord and the ExecutionResult it ends in
all carry the same six fields naming the call (its id, tenant, principal, workflow, run and when
it was made). `identity_of` reads them from any of those models and a new record is built with
`Call(**identity_of(proposal), ...)`, so a field added to the call's identity is added here once
instead of at every stage that builds a record.
"""

from __future__ import annotations

from typing import TypedDict

from toolgate.schemas.models import Call, ExecutionResult, Principal, ToolProposal

# Every record that names a call, each with the six fields its schema gives it.
Identified = ToolProposal | Call | ExecutionResult


class CallIdentity(TypedDict):
    call_id: str
    tenant_id: str
    principal: Principal
    workflow_id: str
    run_id: str
    created_at_ms: int


def identity_of(record: Identified) -> CallIdentity:
    return CallIdentity(
        call_id=record.call_id,
        tenant_id=record.tenant_id,
        principal=record.principal,
        workflow_id=record.workflow_id,
        run_id=record.run_id,
        created_at_ms=record.created_at_ms,
    )
