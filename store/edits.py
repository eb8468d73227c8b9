"""toolgate.approvals' edit columns (migration 0032, issue 52 part 3): approval-wait records who
edited a ticket it closed as EDITED, by which decision, and the edited payload's hash
(workers/approval/tickets.py); validation reads the EDITED tickets a re-entered edit names, to
prove it (workers/validation/edit_admission.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection

MARK_EDITED = (
    "UPDATE toolgate.approvals a SET edited_by = e.edited_by, edit_decision_id = e.decision_id, "
    "edited_payload_hash = e.payload_hash "
    "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[]) "
    "AS e(approval_id, edited_by, decision_id, payload_hash) "
    "WHERE a.approval_id = e.approval_id AND a.status = 'EDITED' AND a.edit_decision_id IS NULL"
)
# The edited call's ticket also reaches the groups the held one had reached (by escalation): its
# editor was allowed there, and is counted on it (execution counts only approvers of reached groups).
# A ticket open to any allowed approver (no groups) stays so; none is opened to more than that.
LINK = """
UPDATE toolgate.approvals a SET edit_of = e.edit_of,
    approver_groups = CASE WHEN cardinality(a.approver_groups) = 0 OR o.approver_groups IS NULL THEN a.approver_groups
        ELSE a.approver_groups || ARRAY(SELECT g FROM unnest(o.approver_groups) AS g WHERE g <> ALL(a.approver_groups))
    END
FROM unnest(%b::text[], %b::text[]) AS e(approval_id, edit_of)
LEFT JOIN toolgate.approvals o ON o.approval_id = e.edit_of
WHERE a.approval_id = e.approval_id
"""
REQUIRED = "SELECT approval_id, required_approvals FROM toolgate.approvals WHERE approval_id = ANY(%b)"
EDITED_INTO = "SELECT approval_id FROM toolgate.approvals WHERE edit_of = %s ORDER BY created_at LIMIT 1"
EDIT_STATE = """
SELECT a.edited_by, (SELECT e.approval_id FROM toolgate.approvals e WHERE e.edit_of = a.approval_id
                     ORDER BY e.created_at LIMIT 1),
       a.edit_of, o.edited_by, o.packet->'arguments'
FROM toolgate.approvals a LEFT JOIN toolgate.approvals o ON o.approval_id = a.edit_of
WHERE a.approval_id = %s
"""
# With the public key the edit decision was counted under (migration 0036 keeps it with the decision).
EDITED = """
SELECT a.approval_id, a.tenant_id, a.call_id, a.payload_hash, a.edit_decision_id, a.request, a.edited_payload_hash,
       d.public_key
FROM toolgate.approvals a LEFT JOIN toolgate.approval_decisions d ON d.decision_id = a.edit_decision_id
WHERE a.approval_id = ANY(%b) AND a.status = 'EDITED'
"""


async def mark_edited(conn: AsyncConnection[Any], rows: Sequence[tuple[str, str, str, str]]) -> None:
    """(approval_id, edited_by, decision_id, edited payload hash) on tickets just closed EDITED."""
    await conn.execute(MARK_EDITED, [list(column) for column in zip(*rows, strict=True)])


@dataclass(frozen=True, slots=True)
class EditedTicket:
    """A ticket an approver's edit closed: what validation proves a re-entered edit against."""

    approval_id: str
    tenant_id: str
    call_id: str
    payload_hash: str
    edit_decision_id: str | None
    request: bytes  # the held call's StageRecord, as validation admitted it
    edited_payload_hash: str | None = None  # the payload approval-wait accepted the edit of
    # The approver's public key that verified the edit decision when approval-wait counted it (None
    # on decisions counted before migration 0036 kept it)
    counted_under: bytes | None = None


async def edited(conn: AsyncConnection[Any], ids: Sequence[str]) -> dict[str, EditedTicket]:
    """The EDITED tickets among these approval ids."""
    cur = await conn.execute(EDITED, (list(ids),))
    return {
        r[0]: EditedTicket(
            approval_id=r[0],
            tenant_id=r[1],
            call_id=r[2],
            payload_hash=r[3],
            edit_decision_id=r[4],
            request=bytes(r[5]),
            edited_payload_hash=r[6],
            counted_under=bytes(r[7]) if r[7] is not None else None,
        )
        for r in await cur.fetchall()
    }


async def link(conn: AsyncConnection[Any], rows: Sequence[tuple[str, str]]) -> None:
    """(approval_id of an edited call's new ticket, approval_id of the ticket it was edited from):
    linked, and the groups the held ticket reached added to the new one's (LINK)."""
    if rows:
        await conn.execute(LINK, [list(column) for column in zip(*rows, strict=True)])


async def required(conn: AsyncConnection[Any], ids: Sequence[str]) -> dict[str, int]:
    """How many approvals each of these tickets required."""
    cur = await conn.execute(REQUIRED, (list(ids),))
    return {row[0]: int(row[1]) for row in await cur.fetchall()}


def edited_into(conn: Connection[Any], approval_id: str) -> str | None:
    """The ticket of the call an edit of `approval_id` re-entered, once approval-wait opened it."""
    row = conn.execute(EDITED_INTO, (approval_id,)).fetchone()
    return str(row[0]) if row is not None else None


@dataclass(frozen=True, slots=True)
class EditState:
    """A ticket's part in an edit: who edited it and the ticket the edited call waits under; or,
    for an edited call's ticket, the ticket it was edited from, by whom, and the arguments held there."""

    edited_by: str | None
    edited_into: str | None
    edit_of: str | None
    edit_of_by: str | None
    held_arguments: dict[str, Any] | None


def edit_state(conn: Connection[Any], approval_id: str) -> EditState | None:
    row = conn.execute(EDIT_STATE, (approval_id,)).fetchone()
    return EditState(*row) if row is not None else None


async def edit_state_of(conn: AsyncConnection[Any], approval_id: str) -> EditState | None:
    """`edit_state`, for the console's pool."""
    row = await (await conn.execute(EDIT_STATE, (approval_id,))).fetchone()
    return EditState(*row) if row is not None else None
