"""toolgate.approvals and toolgate.approval_decisions as the MCP door reads a held call as a task
(door/task_door.py): its latest ticket by the call's tenant and id, with its packet (who must
approve, by when, and what a withdrawal must name), the approvals counted so far and when it was
opened and last decided."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

TASK = """
SELECT a.approval_id, a.status, a.packet, a.required_approvals,
       count(d.*) FILTER (WHERE d.verdict = 'APPROVE'), a.approver_groups,
       (extract(epoch FROM a.expires_at) * 1000)::bigint, (extract(epoch FROM a.created_at) * 1000)::bigint,
       (extract(epoch FROM greatest(a.created_at, a.decided_at, max(d.recorded_at))) * 1000)::bigint
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE a.tenant_id = %s AND a.call_id = %s GROUP BY a.approval_id ORDER BY a.created_at DESC LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class HeldCall:
    """A call's latest ticket, as its task says it."""

    approval_id: str
    status: str
    packet: dict[str, Any]
    required_approvals: int
    approved: int
    approver_groups: list[str]
    expires_at_ms: int
    created_at_ms: int
    updated_at_ms: int


async def held_call(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> HeldCall | None:
    """The call's latest ticket; None: the call was never held (or is not the tenant's)."""
    row = await (await conn.execute(TASK, (tenant_id, call_id))).fetchone()
    return None if row is None else HeldCall(*row)
