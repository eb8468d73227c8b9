"""Approval-wait's reads of tickets and approvers (decision.py judges them).

`lock` takes the tickets FOR UPDATE in approval_id order, so two decision rounds on the same
tickets never deadlock; `load` reads them with their decisions and the held call; `approvers`
reads the approvers that decided.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from toolgate.schemas.codec import codec
from toolgate.schemas.models import StageRecord
from toolgate.workers.approval.decision import Approver, Ticket

LOAD_TICKETS = """
SELECT a.approval_id, a.tool_name, a.tool_version, a.payload_hash, a.risk_class, a.required_approvals, a.status,
       (extract(epoch FROM a.expires_at) * 1000)::bigint, a.request, a.home_partition,
       coalesce(array_agg(d.approver_id) FILTER (WHERE d.verdict = 'APPROVE'), '{}'),
       coalesce(array_agg(d.approver_id) FILTER (WHERE d.approver_id IS NOT NULL), '{}'),
       coalesce(array_agg(d.decision_id) FILTER (WHERE d.decision_id IS NOT NULL), '{}'), a.approver_groups,
       a.state_version
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d USING (approval_id)
WHERE a.approval_id = ANY(%s)
GROUP BY a.approval_id
"""
LOCK_TICKETS = """
SELECT approval_id FROM toolgate.approvals WHERE approval_id = ANY(%s) ORDER BY approval_id FOR UPDATE
"""
LOAD_APPROVERS = """
SELECT approver_id, public_key, risk_classes, status = 'active', groups FROM toolgate.approvers
WHERE approver_id = ANY(%s)
"""


async def lock(conn: AsyncConnection[Any], ids: list[str]) -> None:
    await conn.execute(LOCK_TICKETS, (ids,))


async def load(
    conn: AsyncConnection[Any], ids: list[str]
) -> tuple[dict[str, Ticket], dict[str, tuple[StageRecord, int]]]:
    cur = await conn.execute(LOAD_TICKETS, (ids,))
    tickets: dict[str, Ticket] = {}
    requests: dict[str, tuple[StageRecord, int]] = {}
    for row in await cur.fetchall():
        approval_id, home = row[0], row[9]
        tickets[approval_id] = Ticket(
            *row[:7], int(row[7]), tuple(row[10]), tuple(row[11]), frozenset(row[12]), tuple(row[13]), row[14]
        )
        request = row[8]
        requests[approval_id] = (codec().decode(bytes(request), StageRecord), home)
    return tickets, requests


async def approvers(conn: AsyncConnection[Any], ids: list[str]) -> dict[str, Approver]:
    cur = await conn.execute(LOAD_APPROVERS, (ids,))
    return {r[0]: Approver(r[0], bytes(r[1]), tuple(r[2]), bool(r[3]), tuple(r[4])) for r in await cur.fetchall()}
