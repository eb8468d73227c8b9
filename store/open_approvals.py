"""toolgate.approvals' open tickets, outside a call's round. The approval sweep's
(workers/approval/sweep.py, run by approval-wait's ExpirySweeper and by reconciliation for
expiry): tickets past their expiry set AUTO_DENIED, tickets that reached their escalation time read
and moved to their next approver group, and how long until the next one falls due. A re-drive's
(workers/reconciliation/redrive.py): the tickets still in flight, to say again. `toolgate status`'s
(ops/status.py): how many wait, and for how long. The operators' (ops/approvals.py): the tickets
whose approval id starts with what an approver typed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection

from toolgate.store.db import one_row, rows_json

EXPIRE = """
UPDATE toolgate.approvals SET status = 'AUTO_DENIED', decided_at = now()
WHERE approval_id IN (
    SELECT approval_id FROM toolgate.approvals WHERE status = 'PENDING' AND expires_at < now()
    ORDER BY expires_at LIMIT 500 FOR UPDATE SKIP LOCKED)
RETURNING approval_id, call_id, tenant_id, request
"""
ESCALATE = """
SELECT approval_id, call_id, tenant_id, tool_name, tool_version, escalation_level, packet, request,
       (extract(epoch FROM created_at) * 1000)::bigint, (extract(epoch FROM expires_at) * 1000)::bigint
FROM toolgate.approvals
WHERE status = 'PENDING' AND escalate_at <= now() AND expires_at > now()
ORDER BY escalate_at LIMIT 500 FOR UPDATE SKIP LOCKED
"""
RECORD_ESCALATIONS = """
UPDATE toolgate.approvals a SET escalation_level = e.level, approver_groups = e.groups, packet = e.packet,
    escalated_at = now(), escalate_at = to_timestamp(e.next_ms / 1000.0)
FROM jsonb_to_recordset(%s::jsonb) AS e(approval_id text, level int, groups text[], packet jsonb, next_ms bigint)
WHERE a.approval_id = e.approval_id
"""
# How long until the next ticket falls due (its escalation or its expiry), in seconds (at most 0:
# now; NULL: no ticket waits): the first entry of each of two partial indexes (approvals_pending_
# idx, approvals_escalation_idx), not a transaction of two locking statements, on which an idle
# approval-wait spent CPU every second for nothing (docs/performance.md, "Figures behind the code").
NEXT_DUE = """
SELECT extract(epoch FROM least(
    (SELECT min(expires_at) FROM toolgate.approvals WHERE status = 'PENDING'),
    (SELECT min(escalate_at) FROM toolgate.approvals WHERE status = 'PENDING')) - now())::float8
"""


@dataclass(frozen=True, slots=True)
class Expired:
    """A ticket the sweep has just AUTO_DENIED, with its held call (as encoded)."""

    approval_id: str
    call_id: str
    tenant_id: str
    request: bytes


@dataclass(frozen=True, slots=True)
class Due:
    """A PENDING ticket that reached its escalation time, locked until the transaction ends."""

    approval_id: str
    call_id: str
    tenant_id: str
    tool_name: str
    tool_version: str
    escalation_level: int
    packet: dict[str, Any]
    request: bytes
    created_at_ms: int
    expires_at_ms: int


async def expire(conn: AsyncConnection[Any]) -> list[Expired]:
    """AUTO_DENY up to 500 tickets past their expiry (none another sweep holds); those it did."""
    cur = await conn.execute(EXPIRE)
    return [Expired(*row) for row in await cur.fetchall()]


async def due(conn: AsyncConnection[Any]) -> list[Due]:
    """Up to 500 tickets due to escalate (none another sweep holds), locked."""
    cur = await conn.execute(ESCALATE)
    return [Due(*row) for row in await cur.fetchall()]


async def record_escalations(conn: AsyncConnection[Any], rows: list[dict[str, Any]]) -> None:
    """Write each ticket's new level, groups, packet and next escalation (rows of
    RECORD_ESCALATIONS's recordset)."""
    await conn.execute(RECORD_ESCALATIONS, (rows_json(rows),))


async def until_due(conn: AsyncConnection[Any]) -> float | None:
    """Seconds until the next ticket falls due (at most 0: now); None: no ticket waits."""
    row = await (await conn.execute(NEXT_DUE)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


IN_FLIGHT = """
SELECT approval_id FROM toolgate.approvals
WHERE status = 'PENDING' OR (status = 'APPROVED' AND consumed_by IS NULL)
ORDER BY created_at
"""
WAITING = """
SELECT count(*), extract(epoch FROM now() - min(created_at))::float8,
       count(*) FILTER (WHERE expires_at < now()),
       extract(epoch FROM now() - min(expires_at))::float8
FROM toolgate.approvals WHERE status = 'PENDING'
"""


@dataclass(frozen=True, slots=True)
class Waiting:
    """The tickets that wait: how many, the oldest's age, how many are past their expiry and by
    how long the most overdue is."""

    pending: int
    oldest_age_s: float | None
    past_expiry: int
    most_overdue_s: float | None


async def in_flight(conn: AsyncConnection[Any]) -> list[str]:
    """The tickets still waiting, or approved and not yet consumed, oldest first."""
    cur = await conn.execute(IN_FLIGHT)
    return [row[0] for row in await cur.fetchall()]


def waiting(conn: Connection[Any]) -> Waiting:
    return Waiting(*one_row(conn, WAITING))


# A prefix's tickets, any status (a card is shown after its decision too); LIKE's own escape
# character is the backslash, written out so the pattern's meaning never rests on a default.
BY_PREFIX = r"""
SELECT approval_id FROM toolgate.approvals WHERE approval_id LIKE %s ESCAPE '\' ORDER BY approval_id LIMIT %s
"""


def like_prefix(prefix: str) -> str:
    """The LIKE pattern of the ids that start with `prefix`, every `%`, `_` and backslash in it
    literal (an approver who types `appr_%` means those three characters, not "anything")."""
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"{escaped}%"


def by_prefix(conn: Connection[Any], prefix: str, limit: int = 5) -> list[str]:
    """Up to `limit` approval ids that start with `prefix`, in id order."""
    return [row[0] for row in conn.execute(BY_PREFIX, (like_prefix(prefix), limit)).fetchall()]
